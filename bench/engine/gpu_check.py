"""CUDA sanity check before the bench: greedy tokens of the engine (CUDA graphs, bf16) against teacher-forced
transformers logits, and the raw decode step time per batch size.

    python -m bench.engine.gpu_check --shape llama-1b
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import time

import torch

from bench.engine.shapes import build_model
from engine_svc.__main__ import make_parser
from engine_svc.scheduling.admission import admit
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence
from engine_svc.serving.loader import build_engine
from engine_svc.serving.streaming import collect
from scaleout.v1 import common_pb2, engine_pb2


async def greedy(loaded, prompts, new_tokens):
    loaded.engine.start(asyncio.get_running_loop())

    async def one(prompt):
        message = engine_pb2.GenerateRequest(
            token_ids=prompt,
            sampling_params=common_pb2.SamplingParams(temperature=0.0, max_tokens=new_tokens, ignore_eos=True),
        )
        rid, seqs, _ = admit(message, loaded.limits)
        return list((await collect(loaded.engine, loaded.engine.submit(rid, seqs))).choices[0].token_ids)

    try:
        return await asyncio.gather(*[one(p) for p in prompts])
    finally:
        loaded.engine.stop()


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


@contextlib.contextmanager
def decode_batch(pool, batch: int, context: int):
    """`batch` decoding sequences of `context` tokens (their blocks held while inside), as decode chunks."""
    seqs = [Sequence(f"s{i}", 0, [5] * context, SamplingConfig()) for i in range(batch)]
    for s in seqs:
        assert pool.grow(s, context + 1)
        s.append(7)
        s.num_computed = context
    try:
        yield [Chunk(s, context, 1) for s in seqs]
    finally:
        for s in seqs:
            pool.release(s)


def step_times(runner, pool, batches, context: int) -> dict[int, float]:
    times = {}
    for batch in batches:
        with decode_batch(pool, batch, context) as chunks:
            for _ in range(3):
                runner.execute(chunks)
            sync()
            start = time.perf_counter()
            for _ in range(20):
                runner.execute(chunks)
            sync()
            times[batch] = (time.perf_counter() - start) / 20
    return times


def kernel_table(runner, pool, batch: int, context: int, rows: int = 22) -> str:
    """GPU time per kernel for one graph-replayed decode step (torch.profiler over 10 steps)."""
    with decode_batch(pool, batch, context) as chunks:
        for _ in range(3):
            runner.execute(chunks)
        sync()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                runner.execute(chunks)
            sync()
    return prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows, max_name_column_width=70)


def step_breakdown(model, shape: str, streams: int, new_tokens: int) -> str:
    """Where a step's wall time goes with `streams` in-process streams (ms per step)."""
    from engine_svc.model import runner as runner_module
    from engine_svc.model import sampler as sampler_module
    from engine_svc.scheduling import scheduler as scheduler_module
    from engine_svc.serving import engine as engine_module

    spent: dict[str, float] = {}
    patched = [
        (runner_module.ModelRunner, "execute"),
        (sampler_module.Sampler, "sample"),
        (scheduler_module.Scheduler, "schedule"),
        (engine_module.Engine, "_step"),
    ]
    originals = [getattr(cls, name) for cls, name in patched]

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - start

        return wrapper

    for (cls, name), fn in zip(patched, originals):
        setattr(cls, name, timed(name, fn))
    try:
        loaded = build_engine(
            model, make_parser().parse_args(["--max-num-seqs", "256", "--max-model-len", "2048"]), model_name=shape
        )
        g = torch.Generator().manual_seed(2)
        prompts = [torch.randint(10, 120000, (128,), generator=g).tolist() for _ in range(streams)]
        asyncio.run(greedy(loaded, prompts, 8))  # warm-up: graphs
        spent.clear()
        start = time.perf_counter()
        steps0 = loaded.engine.steps
        asyncio.run(greedy(loaded, prompts, new_tokens))
        wall = time.perf_counter() - start
        steps = loaded.engine.steps - steps0
    finally:
        for (cls, name), fn in zip(patched, originals):
            setattr(cls, name, fn)
    per = {k: f"{v / steps * 1e3:.2f}" for k, v in spent.items()}
    return f"{streams} streams: {streams * new_tokens / wall:.0f} tok/s, {steps} steps, ms/step {per}, wall/step {wall / steps * 1e3:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="llama-1b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--streams", default="1,256", help="in-process step breakdown at these concurrencies")
    parser.add_argument("--kernels", default="", help="GPU time per kernel of a decode step at these batch sizes")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("engine_svc.model.triton_linear").setLevel(logging.INFO)  # which matmuls take the skinny kernel
    model = build_model(args.shape, args.device, torch.bfloat16 if args.device == "cuda" else torch.float32)
    loaded = build_engine(
        model, make_parser().parse_args(["--max-num-seqs", "256", "--max-model-len", "2048"]), model_name=args.shape
    )
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(10, 120000, (n,), generator=g).tolist() for n in (5, 37, 128, 300)]
    outputs = asyncio.run(greedy(loaded, prompts, 24))
    agree, close = 0, 0
    with torch.inference_mode():
        for prompt, out in zip(prompts, outputs):
            ids = torch.tensor([prompt + out], device=args.device)
            logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
            best = logits.max(-1).values
            chosen = logits.gather(1, torch.tensor(out, device=args.device)[:, None])[:, 0]
            agree += int((logits.argmax(-1).cpu() == torch.tensor(out)).sum())
            close += int(((best - chosen) <= 0.02 * best.abs().clamp(min=1)).sum())
    total = sum(map(len, outputs))
    print(
        f"{args.shape}: greedy tokens equal to transformers argmax {agree}/{total}, within bf16 noise {close}/{total}"
    )
    times = step_times(loaded.engine.runner, loaded.engine.scheduler.pool, [1, 8, 64, 256], 192)
    print(
        f"{args.shape}: decode step (graph replay + host prep), context 192: "
        + ", ".join(f"b={b}: {t * 1e3:.2f} ms ({b / t:.0f} tok/s)" for b, t in times.items()),
        flush=True,
    )
    for batch in [int(b) for b in args.kernels.split(",") if b]:
        print(
            f"{args.shape}: kernels of one decode step x10, batch {batch}, context 192\n"
            + kernel_table(loaded.engine.runner, loaded.engine.scheduler.pool, batch, 192),
            flush=True,
        )
    del loaded
    gc.collect()
    torch.cuda.empty_cache()
    for streams in [int(s) for s in args.streams.split(",") if s]:
        print(f"{args.shape}: " + step_breakdown(model, args.shape, streams, 64), flush=True)


if __name__ == "__main__":
    main()
