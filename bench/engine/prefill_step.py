"""Time of one prefill-only step of fresh prompts for several SdpaBackend.rows_per_call caps, side by side:
1 is one SDPA call per chunk per layer; larger caps let adjacent chunks share a call (block-diagonal mask).

    python -m bench.engine.prefill_step                      # CPU, default model, float32, 16 x 128 tokens
    python -m bench.engine.prefill_step --device cuda --shape llama-1b --dtype bfloat16 --chunks 16,64 \
        --rows-per-call 1,1024,2048,8192
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bench.engine.shapes import build_model
from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.block_pool import BlockPool
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence

BLOCK_SIZE = 16


def step_times(runner, chunks, caps: list[int], repeats: int) -> list[float]:
    """Median seconds of runner.execute(chunks) per cap, the caps interleaved (a first round warms up)."""
    times = [[] for _ in caps]
    for _ in range(repeats + 1):
        for cap, samples in zip(caps, times):
            runner.backend.rows_per_call = cap
            start = time.perf_counter()
            runner.execute(chunks)
            if runner.device.type == "cuda":
                torch.cuda.synchronize()
            samples.append(time.perf_counter() - start)
    return [statistics.median(samples[1:]) for samples in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="default", help="default (SmolLM2-135M) or a bench/engine/shapes.py one")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--chunks", default="16", help="comma-separated numbers of fresh prompts per step")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--rows-per-call", default="1,2048", help="comma-separated caps; the first is the base")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    counts = [int(n) for n in args.chunks.split(",")]
    caps = [int(n) for n in args.rows_per_call.split(",")]
    model = build_model(args.shape, args.device, getattr(torch, args.dtype), max_len=8192)
    num_blocks = max(counts) * -(-args.prompt_len // BLOCK_SIZE) + 1
    runner = ModelRunner(
        model,
        block_size=BLOCK_SIZE,
        num_blocks=num_blocks,
        max_num_seqs=max(counts),
        max_model_len=args.prompt_len,
        cuda_graphs=False,
    )
    vocab = model.config.vocab_size
    for count in counts:
        pool = BlockPool(num_blocks, BLOCK_SIZE)
        chunks = []
        for i in range(count):
            seq = Sequence(f"s{i}", 0, torch.randint(3, vocab, (args.prompt_len,)).tolist(), SamplingConfig())
            assert pool.grow(seq, args.prompt_len)
            chunks.append(Chunk(seq, 0, args.prompt_len))
        times = step_times(runner, chunks, caps, args.repeats)
        print(
            f"{count} x {args.prompt_len} tokens: "
            + ", ".join(f"rows_per_call {cap}: {t * 1e3:.1f} ms ({times[0] / t:.2f}x)" for cap, t in zip(caps, times)),
            flush=True,
        )


if __name__ == "__main__":
    main()
