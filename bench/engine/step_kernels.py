"""GPU time per kernel of one step of each kind, on the served runner (CUDA): a decode step (graph replay) of
B rows at context C (and its wall time), and a mixed step (eager) of D decodes at context C plus P prefill chunks
of L tokens, the latter with the eager and the compiled elementwise ops side by side. Then the paged decode kernel alone
against the copy bandwidth, per launch configuration.

    python -m bench.engine.step_kernels --shape llama-1b --decode 256x1152 --mixed 128x1152+7x1024
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from triton.testing import do_bench  # pyright: ignore[reportMissingImports]

from bench.engine.gpu_check import decode_batch, kernel_table, sync
from bench.engine.shapes import build_model
from engine_svc.__main__ import make_parser
from engine_svc.model import triton_attention
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence
from engine_svc.serving.loader import build_engine


def mixed_chunks(pool, decodes: list[Chunk], prefills: int, length: int) -> list[Chunk]:
    seqs = [Sequence(f"p{i}", 0, [9] * length, SamplingConfig()) for i in range(prefills)]
    for s in seqs:
        assert pool.grow(s, length), "KV cache too small for the mixed step"
    return decodes + [Chunk(s, 0, length) for s in seqs]


def timed(runner, chunks, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats + 1):
        sync()
        start = time.perf_counter()
        runner.execute(chunks)
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def attention_sweep(runner, pool, rows: int, context: int) -> str:
    """The paged decode kernel alone over `rows` sequences of `context` tokens, per (tile, warps, stages)."""
    layer = runner.model.layer0
    cache = runner.kv_caches[0]
    lines = []
    with decode_batch(pool, rows, context) as chunks:
        width = max(len(c.seq.block_ids) for c in chunks)
        tables = torch.tensor(
            [c.seq.block_ids + [0] * (width - len(c.seq.block_ids)) for c in chunks], dtype=torch.int32
        ).to(runner.device)
        lengths = torch.full((rows,), context + 1, dtype=torch.int32, device=runner.device)
        q = torch.randn(rows, layer.num_heads, layer.head_dim, dtype=runner.dtype, device=runner.device)
        kv_bytes = rows * (context + 1) * 2 * layer.num_kv_heads * layer.head_dim * q.element_size()
        splits = triton_attention.pick_splits(rows, layer.num_kv_heads, width * runner.block_size)
        for tile in (32, 64, 128):
            for warps in (2, 4, 8):
                for stages in (1, 2, 3, 4):

                    def run():
                        triton_attention.paged_attention(
                            q,
                            cache,
                            tables,
                            lengths,
                            runner.block_size,
                            0.1,
                            splits=splits,
                            tile=tile,
                            num_warps=warps,
                            num_stages=stages,
                        )

                    try:
                        ms = do_bench(run, warmup=5, rep=30)
                    except Exception as error:  # a configuration that does not fit (shared memory)
                        lines.append(f"  tile {tile:>3} warps {warps} stages {stages}: {type(error).__name__}")
                        continue
                    lines.append(
                        f"  tile {tile:>3} warps {warps} stages {stages}: {ms * 1e3:7.1f} us  "
                        f"{kv_bytes / ms / 1e6:7.0f} GB/s"
                    )
    return f"paged decode attention, {rows} rows x {context} tokens, splits {splits}\n" + "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="llama-1b")
    parser.add_argument("--decode", default="256x1152", help="ROWSxCONTEXT of the decode step")
    parser.add_argument("--mixed", default="128x1152+7x1024", help="DECODESxCONTEXT+CHUNKSxLENGTH of the mixed step")
    parser.add_argument("--engine-flags", default="--max-model-len 2048")
    parser.add_argument("--decode-only", action="store_true", help="the decode step alone (no sweep, no mixed step)")
    args = parser.parse_args()
    model = build_model(args.shape, "cuda", torch.bfloat16)
    loaded = build_engine(model, make_parser().parse_args(args.engine_flags.split()), model_name=args.shape)
    runner, pool = loaded.engine.runner, loaded.engine.scheduler.pool
    rows, context = map(int, args.decode.split("x"))
    print(f"{args.shape}: decode step, {rows} rows x {context} tokens (graph replay)")
    with decode_batch(pool, rows, context) as chunks:
        print(f"a whole decode step (inputs, graph replay, sampling): {timed(runner, chunks, 50) * 1e3:.3f} ms")
    print(kernel_table(runner, pool, rows, context), flush=True)
    if args.decode_only:
        return
    print(attention_sweep(runner, pool, rows, context), flush=True)
    decode_part, prefill_part = args.mixed.split("+")
    decodes, decode_context = map(int, decode_part.split("x"))
    prefills, length = map(int, prefill_part.split("x"))
    with decode_batch(pool, decodes, decode_context) as chunks:
        chunks = mixed_chunks(pool, chunks, prefills, length)
        eager_ops = runner.eager_ops
        seconds = {}
        for name, ops in (("eager ops", eager_ops), ("compiled ops", runner.model.ops)):
            runner.eager_ops = ops
            seconds[name] = timed(runner, chunks)
        runner.eager_ops = eager_ops
        tokens = decodes + prefills * length
        flops = (
            2
            * tokens
            * sum(p.numel() for n, p in runner.model.named_parameters() if not n.startswith(("embed", "head")))
        )
        print(
            f"{args.shape}: mixed step {args.mixed} ({tokens} tokens): "
            + ", ".join(f"{k} {v * 1e3:.2f} ms ({flops / v / 1e12:.0f} TFLOP/s of matmul)" for k, v in seconds.items())
        )
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            runner.execute(chunks)
            sync()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=24, max_name_column_width=70))


if __name__ == "__main__":
    main()
