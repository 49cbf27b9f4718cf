"""The layers' projections in bf16 against fp8 (engine_svc/model/fp8_linear.py: e4m3, a scale per token and per
weight row, on Hopper's fp8 tensor cores), at the shape's sizes and several token counts: the matmul alone and
with the activations' quantization (what the engine runs), and the fp8 result's error against bf16; then the matmul
alone, unsplit, with the tensor cores' fast accumulation (no float32 promotion of partial sums; the engine
takes it for unsplit products of FAST_ACCUM_ROWS rows or more) and its error.

    python -m bench.engine.fp8_gemm --shape llama-8b --rows 256,512,2304,8192
"""

from __future__ import annotations

import argparse
import sys

import torch
from torch import nn

from bench.engine.kernels import timed
from bench.engine.shapes import SHAPES, projection_sizes
from engine_svc.model.decoder import whole
from engine_svc.model.fp8_linear import Fp8Linear
from engine_svc.model.fused_ops import FusedOps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="llama-8b")
    parser.add_argument("--rows", default="256,512,2304,8192")
    args = parser.parse_args()
    quantize = FusedOps(compile_kernels=True).quantize_rows
    print(
        f"{'matmul':<9}{'rows':>6}{'bf16 us':>10}{'TFLOP/s':>9}{'fp8 mm us':>11}{'+quant us':>11}{'TFLOP/s':>9}  error"
        f"{'fast mm us':>12}{'TFLOP/s':>9}  error"
    )
    for name, (n, k) in projection_sizes(SHAPES[args.shape]).items():
        linear = nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16)
        fp8 = Fp8Linear(linear, quantize, fast_accum_rows=sys.maxsize)  # float32 promotion throughout
        for rows in map(int, args.rows.split(",")):
            x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
            prequantized = quantize(x)
            fp8.quantize = lambda _: prequantized  # the matmul alone
            mm_only = timed(lambda: whole(fp8(x)))  # split: with the halves' add, which serving folds into the norm
            fp8.quantize = quantize
            bf16, both = timed(lambda: linear(x)), timed(lambda: whole(fp8(x)))
            ref = linear(x).float()
            error = ((whole(fp8(x)).float() - ref).norm() / ref.norm()).item()
            q, scale = prequantized
            fast_mm = lambda: fp8._mm(q, fp8.weight, scale, fast=True)  # noqa: E731  # unsplit, whatever the size
            fast = timed(fast_mm)
            fast_error = ((fast_mm().float() - ref).norm() / ref.norm()).item()
            flops = 2 * rows * n * k
            print(
                f"{name:<9}{rows:>6}{bf16:>10.1f}{flops / bf16 / 1e6:>9.0f}{mm_only:>11.1f}{both:>11.1f}"
                f"{flops / both / 1e6:>9.0f}  {error:.4f}{fast:>12.1f}{flops / fast / 1e6:>9.0f}  {fast_error:.4f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
