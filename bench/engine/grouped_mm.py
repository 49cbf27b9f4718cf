"""A mixture's experts at several token counts (CUDA, bf16, random weights at a family shape's sizes, even
routing): the Triton grouped GEMM on its measured tiles (triton_moe.py) against torch's grouped GEMM
(torch_grouped_moe.py), each timed with triton's do_bench (caches flushed between runs), with the TFLOP/s of the
expert products and the largest difference between the two outputs.

    python -m bench.engine.grouped_mm --shape qwen3-30b-a3b --tokens 64,256,1024,4096,8192
"""

# pyright: reportArgumentType=false
# (triton.testing types do_bench's result as a float, a list or None; it is a float here.)

from __future__ import annotations

import argparse

import torch
from triton.testing import do_bench  # pyright: ignore[reportMissingImports]

from bench.engine.shapes import FAMILY_SHAPES
from engine_svc.model.moe import Gating
from engine_svc.model.torch_grouped_moe import grouped_mm_experts
from engine_svc.model.triton_moe import fused_experts, tiles_for


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="qwen3-30b-a3b")
    parser.add_argument("--tokens", default="64,256,1024,4096,8192")
    args = parser.parse_args()
    shape = FAMILY_SHAPES[args.shape]
    experts, top_k = shape["num_experts"], shape["num_experts_per_tok"]
    hidden, inner = shape["hidden_size"], shape["moe_intermediate_size"]
    gate_up = torch.randn(experts, 2 * inner, hidden, device="cuda", dtype=torch.bfloat16) / hidden**0.5
    down = torch.randn(experts, hidden, inner, device="cuda", dtype=torch.bfloat16) / inner**0.5
    print(f"{torch.cuda.get_device_name()}, {args.shape}: {experts} experts, top {top_k}, {hidden} x {inner}")
    print(f"{'tokens':>7}{'Triton us':>11}{'TFLOP/s':>9}{'grouped us':>12}{'TFLOP/s':>9}{'max diff':>10}")
    for tokens in map(int, args.tokens.split(",")):
        x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
        ids = torch.rand(tokens, experts, device="cuda").topk(top_k, dim=1).indices
        weights = torch.softmax(torch.randn(tokens, top_k, device="cuda"), dim=1).to(torch.bfloat16)
        tiles = tiles_for(tokens, experts, inner, "bf16", x.device)  # the Triton path itself, never the chooser's
        triton_out = fused_experts(x, gate_up, down, weights, ids, Gating(), tiles=tiles)
        grouped_out = grouped_mm_experts(x, gate_up, down, weights, ids, Gating())
        flops = 2 * tokens * top_k * 3 * hidden * inner
        tiled = float(do_bench(lambda: fused_experts(x, gate_up, down, weights, ids, Gating(), tiles=tiles)))
        grouped = float(do_bench(lambda: grouped_mm_experts(x, gate_up, down, weights, ids, Gating())))
        diff = (triton_out.float() - grouped_out.float()).abs().max().item()
        print(
            f"{tokens:>7}{tiled * 1e3:>11.1f}{flops / tiled / 1e9:>9.0f}{grouped * 1e3:>12.1f}"
            f"{flops / grouped / 1e9:>9.0f}{diff:>10.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
