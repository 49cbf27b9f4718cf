"""An fp8 product split over its inner dimension, in one Triton kernel (Hopper: TMA loads, fp8 wgmma).

At decode sizes an 8B model's o_proj and down have too few output tiles for the GPU (256 rows: 2 x 32 tiles of
128 x 128 for the H200's 132 SMs), and cuBLAS (`torch._scaled_mm`) runs them on half of it. Here each output
tile takes one program per half of the inner dimension, so twice the programs fill the GPU; each half leaves
scaled (per row of q times per row of the weight: the scales factor out of the inner sum) as a bf16 partial
sum, and the residual add + RMSNorm kernel after the projection adds the two. It replaced cuBLAS over the two
halves side by side on two streams. On the H200 (bench/engine/results/h200_fp8_gemm_triton_8b.log, the sweep at
256 rows, the product alone): o_proj 8.7 us against cuBLAS's 12.8 in one piece; down 27.4 (5 stages; this
launch takes 4) against 38.4. In the engine's projection with the halves' add (h200_fp8_gemm_split_mm_8b.log
against h200_fp8_gemm_split_8b.log): o_proj 11.2 us against 11.7 for cuBLAS's halves at 256 rows and 8.7
against 10.7 at one row; down 31.0 against 30.8 and 24.8 against 32.7; the 8B decode step at 256 rows
6.85 -> 6.76 ms.
"""
# pyright: reportArgumentType=false, reportCallIssue=false, reportOperatorIssue=false, reportIndexIssue=false
# (Triton's stubs type kernel parameters as tl.constexpr and tensors' indexing narrowly; kernels pass plain values.)

from __future__ import annotations

import torch
import triton  # pyright: ignore[reportMissingImports]
import triton.language as tl  # pyright: ignore[reportMissingImports]
from triton.tools.tensor_descriptor import TensorDescriptor  # pyright: ignore[reportMissingImports]

BLOCK_K = 128
INNER_MULTIPLE = 2 * BLOCK_K  # the inner dimensions the engine's launch takes: a whole number of tiles per half


@triton.jit
def _split_fp8_mm(q_desc, w_desc, out_ptr, scale_q_ptr, scale_w_ptr, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    tile = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tile_m, tile_n = tile % tiles_m, tile // tiles_m  # a weight tile's row tiles side by side: read once from HBM
    part = tl.program_id(1)
    per_part = K // tl.num_programs(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k in range(part * per_part, (part + 1) * per_part, BLOCK_K):
        acc = tl.dot(q_desc.load([tile_m * BLOCK_M, k]), w_desc.load([tile_n * BLOCK_N, k]).T, acc)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    scale_q = tl.load(scale_q_ptr + rows, mask=rows < M, other=0.0)
    scale_w = tl.load(scale_w_ptr + cols, mask=cols < N, other=0.0)
    out = acc * scale_q[:, None] * scale_w[None, :]
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    tl.store(out_ptr + (part * M + rows[:, None]) * N + cols[None, :], out.to(out_ptr.dtype.element_ty), mask=mask)


def split_fp8_mm(
    q: torch.Tensor,
    weight: torch.Tensor,
    scale_q: torch.Tensor,
    scale_w: torch.Tensor,
    out_dtype: torch.dtype,
    parts: int = 2,
    block_m: int | None = None,
    block_n: int = 128,
    num_stages: int = 4,
    num_warps: int = 4,
) -> tuple[torch.Tensor, ...]:
    """q [M, K] e4m3 (contiguous; scale_q [M, 1]) times weight [N, K] e4m3 (scale_w [1, N]) transposed, as
    `parts` partial sums [M, N] over equal parts of K (each a multiple of BLOCK_K), in `out_dtype`. The default
    launch is o_proj's best in the sweep of `python -m bench.engine.fp8_gemm_triton` on the H200 at 256 rows of
    the 8B shape (down's best took 5 stages, 27.4 us; the row tile block_m is 64 under 128 rows); the other
    arguments are for that sweep."""
    rows, inner = q.shape
    block_m = block_m or (128 if rows >= 128 else 64)
    out = torch.empty(parts, rows, weight.shape[0], dtype=out_dtype, device=q.device)
    grid = (triton.cdiv(rows, block_m) * triton.cdiv(weight.shape[0], block_n), parts)
    _split_fp8_mm[grid](  # pyright: ignore[reportIndexIssue]
        TensorDescriptor.from_tensor(q, [block_m, BLOCK_K]),
        TensorDescriptor.from_tensor(weight, [block_n, BLOCK_K]),
        out,
        scale_q,
        scale_w,
        rows,
        weight.shape[0],
        inner,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=BLOCK_K,
        num_stages=num_stages,
        num_warps=num_warps,
    )
    return out.unbind(0)
