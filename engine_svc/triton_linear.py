"""Skinny matmuls for small decode batches on CUDA: a few rows times a weight matrix, read at memory speed.

At batch 1-16 a decode step's projections are matrix-vector products bound by reading the weights. cuBLAS
picks tile shapes for them that leave much of the H200's bandwidth unused on the smaller matrices (qkv and
o_proj of a 1B Llama ran at 1.4-2.1 TB/s against the 4.3 TB/s a copy reaches). Here each program owns a few
output features and streams their weight rows once; the configuration is tuned per (rows, features, inputs)
the first time a shape runs (before graph capture, in the runner's warm-up), and `SkinnyLinear` keeps
cuBLAS wherever that stays faster (on the H200: every projection of a 1B Llama but the vocabulary head).
"""

from __future__ import annotations

import logging

import torch
import triton
import triton.language as tl
from triton.testing import do_bench_cudagraph

log = logging.getLogger(__name__)

MAX_ROWS = 16  # beyond this, cuBLAS's GEMM tiles win

CONFIGS = [
    triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s)
    for n, k, w, s in [(16, 256, 4, 4), (16, 512, 4, 3), (16, 512, 8, 4), (32, 256, 4, 4), (32, 512, 8, 3),
                       (64, 256, 8, 3), (16, 1024, 8, 3), (32, 128, 4, 6), (64, 128, 4, 4), (128, 128, 8, 4),
                       (128, 64, 4, 6), (64, 512, 8, 3)]
]


@triton.autotune(configs=CONFIGS, key=["ROWS_PAD", "N", "K"])
@triton.jit
def _skinny_matmul(x_ptr, w_ptr, out_ptr, M, N, K, stride_x, stride_w, stride_out,
                   ROWS_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.arange(0, ROWS_PAD)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rows[:, None] * stride_x + ks[None, :]
    w_ptrs = w_ptr + cols[:, None] * stride_w + ks[None, :]
    row_mask, col_mask = rows[:, None] < M, cols[:, None] < N
    acc = tl.zeros((ROWS_PAD, BLOCK_N), dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        k_mask = (start + ks)[None, :] < K
        x = tl.load(x_ptrs, mask=row_mask & k_mask, other=0.0)
        w = tl.load(w_ptrs, mask=col_mask & k_mask, other=0.0)
        acc += tl.dot(x, tl.trans(w))
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    out = out_ptr + rows[:, None] * stride_out + cols[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=row_mask & (cols[None, :] < N))


def skinny_matmul(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x [M <= MAX_ROWS, K] @ weight [N, K]^T, both contiguous in K."""
    rows, k = x.shape
    n = weight.shape[0]
    out = x.new_empty(rows, n)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    _skinny_matmul[grid](x, weight, out, rows, n, k, x.stride(0), weight.stride(0), out.stride(0),
                         ROWS_PAD=max(16, triton.next_power_of_2(rows)))
    return out


class SkinnyLinear(torch.nn.Module):
    """A bias-free linear layer that takes the skinny kernel for up to MAX_ROWS rows on CUDA where it beats
    cuBLAS: the first call per (row bucket, shape) times both in CUDA graphs and keeps the faster."""

    faster: dict[tuple[int, int, int], bool] = {}  # (row bucket, out, in) -> skinny wins; shared by all layers

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.weight = linear.weight
        self.bias = None
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] <= MAX_ROWS and x.is_cuda and x.is_contiguous() and self._skinny_wins(x):
            return skinny_matmul(x, self.weight)
        return torch.nn.functional.linear(x, self.weight)

    def _skinny_wins(self, x: torch.Tensor) -> bool:
        key = (triton.next_power_of_2(x.shape[0]), self.out_features, self.in_features)
        wins = self.faster.get(key)
        if wins is None:
            if torch.cuda.is_current_stream_capturing():
                return False
            sample = torch.randn(key[0], self.in_features, device=x.device, dtype=x.dtype)
            skinny_matmul(sample, self.weight)  # tunes the kernel's configuration first
            skinny = do_bench_cudagraph(lambda: skinny_matmul(sample, self.weight), rep=20)
            blas = do_bench_cudagraph(lambda: torch.nn.functional.linear(sample, self.weight), rep=20)
            wins = self.faster[key] = skinny < 0.98 * blas
            log.info("matmul %d x %d, %d rows: skinny kernel %.2f us, cuBLAS %.2f us", key[1], key[2], key[0],
                     skinny * 1e3, blas * 1e3)
        return wins
