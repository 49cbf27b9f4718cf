"""The engine's split fp8 product in Triton (engine_svc/model/triton_fp8_mm.py: TMA loads, fp8 wgmma, the inner
dimension in parts, each a bf16 partial sum) swept over launches (row and column tiles, parts, stages, warps)
against cuBLAS's `torch._scaled_mm` in one piece, precise and with fast accumulation, at the shape's projections.

    python -m bench.engine.fp8_gemm_triton --shape llama-8b --rows 256 [--matmuls gate_up,down] [--block-m 256]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools

import torch

from bench.engine.kernels import timed
from bench.engine.shapes import SHAPES, projection_sizes
from engine_svc.model.fp8_linear import quantize_rows
from engine_svc.model.triton_fp8_mm import BLOCK_K, split_fp8_mm

WARPS = {64: (4,), 128: (4, 8), 256: (8, 16)}  # a warp group (4 warps) per 64 rows of the tile, or twice that
LAUNCHES = [  # (block_m, block_n, parts, stages, warps)
    launch
    for launch in itertools.product((64, 128, 256), (64, 128, 256), (1, 2, 4), (3, 4, 5), (4, 8, 16))
    if (launch[0] + launch[1]) * BLOCK_K * launch[3] <= 220 * 1024 and launch[4] in WARPS[launch[0]]
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="llama-8b")
    parser.add_argument("--rows", default="256")
    parser.add_argument("--matmuls", help="these projections only (comma-separated), default all")
    parser.add_argument("--block-m", help="launches of these row tiles only (comma-separated), default all")
    args = parser.parse_args()
    block_ms = {int(b) for b in args.block_m.split(",")} if args.block_m else {64, 128, 256}
    launches = [launch for launch in LAUNCHES if launch[0] in block_ms]
    print(
        f"{'matmul':<9}{'rows':>5}{'cuBLAS':>8}{'fast':>8}{'TFLOP/s':>9}{'default':>9}{'best':>8}{'TFLOP/s':>9}"
        "  error  best (block_m, block_n, parts, stages, warps); next"
    )
    for name, (n, k) in projection_sizes(SHAPES[args.shape]).items():
        if args.matmuls and name not in args.matmuls.split(","):
            continue
        weight, scale_w = quantize_rows(torch.randn(n, k, device="cuda", dtype=torch.bfloat16))
        scale_w = scale_w.t().contiguous()
        for rows in map(int, args.rows.split(",")):
            q, scale_q = quantize_rows(torch.randn(rows, k, device="cuda", dtype=torch.bfloat16))
            blas = lambda fast: torch._scaled_mm(  # noqa: E731  # pyright: ignore[reportPrivateImportUsage]
                q, weight.t(), scale_a=scale_q, scale_b=scale_w, out_dtype=torch.bfloat16, use_fast_accum=fast
            )
            ref = blas(False).float()
            precise, fast = timed(lambda: blas(False)), timed(lambda: blas(True))
            run = lambda **kw: split_fp8_mm(q, weight, scale_q, scale_w, torch.bfloat16, **kw)  # noqa: E731
            default = timed(run) if k % (2 * BLOCK_K) == 0 else float("nan")
            times, errors = {}, {}
            for launch in launches:
                block_m, block_n, parts, stages, warps = launch
                if k % (parts * BLOCK_K):
                    continue
                kw = dict(parts=parts, block_m=block_m, block_n=block_n, num_stages=stages, num_warps=warps)
                with contextlib.suppress(Exception):  # out of shared memory or registers: not a candidate
                    errors[launch] = ((sum(p.float() for p in run(**kw)) - ref).norm() / ref.norm()).item()
                    times[launch] = timed(lambda: run(**kw))
            ranked = sorted(times, key=times.__getitem__)
            best, flops = ranked[0], 2 * rows * n * k
            print(
                f"{name:<9}{rows:>5}{precise:>8.1f}{fast:>8.1f}{flops / min(precise, fast) / 1e6:>9.0f}{default:>9.1f}"
                f"{times[best]:>8.1f}{flops / times[best] / 1e6:>9.0f}  {errors[best]:.4f}  {best}; "
                + ", ".join(f"{launch} {times[launch]:.1f}" for launch in ranked[1:4]),
                flush=True,
            )


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
