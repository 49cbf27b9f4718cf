"""Skinny matmuls for small decode batches on CUDA: a few rows times a weight matrix, read at memory speed,
optionally with the RMSNorm in front of it and the SwiGLU after it fused in.

At batch 1-16 a decode step's projections are matrix-vector products bound by reading the weights, and the
small kernels between them (residual add + norm, SiLU * up) cost about as much as a small projection each.
Here each program owns a few output features and streams their weight rows once. With `NORM`, the kernel
takes x (+ residual) itself: it adds the residual (program 0 writes the sum, the next residual), scales by the
norm weight as it goes, sums the squares on the way, and applies 1/rms to the accumulator at the end (the rms
is a per-row scalar, so it factors out of the dot product). With `GATED` each program also reads the matching
`up` rows and writes silu(gate) * up. The configuration is tuned per shape the first time it runs (in the
runner's warm-up, before graph capture), and the modules keep the unfused torch path wherever that is faster.
"""

from __future__ import annotations

import logging

import torch
import triton
import triton.language as tl
from triton.testing import do_bench_cudagraph

from engine_svc.model import NormedProjection

log = logging.getLogger(__name__)

MAX_ROWS = 16  # beyond this, cuBLAS's GEMM tiles win

CONFIGS = [
    triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s)
    for n, k, w, s in [(16, 256, 4, 4), (16, 512, 4, 3), (16, 512, 8, 4), (32, 256, 4, 4), (32, 512, 8, 3),
                       (64, 256, 8, 3), (16, 1024, 8, 3), (32, 128, 4, 6), (64, 128, 4, 4), (128, 128, 8, 4),
                       (128, 64, 4, 6), (64, 512, 8, 3), (16, 128, 4, 8), (32, 256, 8, 5)]
]


@triton.autotune(configs=CONFIGS, key=["ROWS_PAD", "N", "K", "NORM", "GATED"])
@triton.jit
def _skinny_matmul(x_ptr, res_ptr, norm_ptr, w_ptr, out_ptr, res_out_ptr, M, N, K, eps, stride_x, stride_w,
                   stride_out, ROWS_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   NORM: tl.constexpr, RESIDUAL: tl.constexpr, GATED: tl.constexpr):
    rows = tl.arange(0, ROWS_PAD)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    row_mask, col_mask = rows[:, None] < M, cols[:, None] < N
    writes_residual = tl.program_id(0) == 0
    acc = tl.zeros((ROWS_PAD, BLOCK_N), dtype=tl.float32)
    up = tl.zeros((ROWS_PAD, BLOCK_N), dtype=tl.float32)
    squares = tl.zeros((ROWS_PAD,), dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        k = start + ks
        x_mask = row_mask & (k[None, :] < K)
        x_at = rows[:, None] * stride_x + k[None, :]
        x = tl.load(x_ptr + x_at, mask=x_mask, other=0.0)
        if RESIDUAL:
            x = (x.to(tl.float32) + tl.load(res_ptr + x_at, mask=x_mask, other=0.0).to(tl.float32)).to(x.dtype)
            tl.store(res_out_ptr + x_at, x, mask=x_mask & writes_residual)
        if NORM:
            wide = x.to(tl.float32)
            squares += tl.sum(wide * wide, axis=1)
            scale = tl.load(norm_ptr + k, mask=k < K, other=0.0).to(tl.float32)
            x = (wide * scale[None, :]).to(w_ptr.dtype.element_ty)
        w_at = cols[:, None] * stride_w + k[None, :]
        w_mask = col_mask & (k[None, :] < K)
        acc += tl.dot(x, tl.trans(tl.load(w_ptr + w_at, mask=w_mask, other=0.0)))
        if GATED:
            up += tl.dot(x, tl.trans(tl.load(w_ptr + N * stride_w + w_at, mask=w_mask, other=0.0)))
    if NORM:
        inverse_rms = tl.rsqrt(squares / K + eps)[:, None]
        acc *= inverse_rms
        up *= inverse_rms
    if GATED:  # rounded like the unfused path's bf16 gate_up output
        gate = acc.to(out_ptr.dtype.element_ty).to(tl.float32)
        acc = gate * tl.sigmoid(gate) * up.to(out_ptr.dtype.element_ty).to(tl.float32)
    out = out_ptr + rows[:, None] * stride_out + cols[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=row_mask & (cols[None, :] < N))


def skinny_matmul(x: torch.Tensor, weight: torch.Tensor, *, norm: torch.Tensor | None = None, eps: float = 0.0,
                  residual: torch.Tensor | None = None, gated: bool = False):
    """x [M <= MAX_ROWS, K] @ weight [N, K]^T, both contiguous in K. With `norm`: rms_norm(x + residual) @
    weight^T and x + residual (x itself without a residual), computed in one pass. `gated`: the weight is
    [gate; up] and the result silu(gate) * up."""
    rows, k = x.shape
    n = weight.shape[0] // 2 if gated else weight.shape[0]
    out = x.new_empty(rows, n)
    total = x if residual is None else torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    _skinny_matmul[grid](x, x if residual is None else residual, x if norm is None else norm, weight, out, total,
                         rows, n, k, eps, x.stride(0), weight.stride(0), out.stride(0),
                         ROWS_PAD=max(16, triton.next_power_of_2(rows)), NORM=norm is not None,
                         RESIDUAL=residual is not None, GATED=gated)
    return out if norm is None else (out, total)


def _bucket(x: torch.Tensor) -> int:
    return triton.next_power_of_2(x.shape[0])


def _fits(*tensors: torch.Tensor | None) -> bool:
    return tensors[0].shape[0] <= MAX_ROWS and all(t is None or (t.is_cuda and t.is_contiguous()) for t in tensors)


class _Chooser:
    """Times the skinny kernel against the torch path once per (row bucket, shape) in CUDA graphs and
    remembers which is faster; until a shape is timed (or while a graph is being captured) torch's path runs."""

    faster: dict[tuple, bool] = {}  # shared by every layer of every model

    def skinny_wins(self, key: tuple, make_sample, skinny, torch_path) -> bool:
        wins = self.faster.get(key)
        if wins is None:
            if torch.cuda.is_current_stream_capturing():
                return False
            sample = make_sample()
            skinny(sample)  # tunes the kernel's configuration first
            fused = do_bench_cudagraph(lambda: skinny(sample), rep=20)
            plain = do_bench_cudagraph(lambda: torch_path(sample), rep=20)
            wins = self.faster[key] = fused < 0.98 * plain
            log.info("%s %d x %d, %d rows: skinny kernel %.2f us, torch %.2f us", *key, fused * 1e3, plain * 1e3)
        return wins


class SkinnyLinear(torch.nn.Module, _Chooser):
    """A bias-free linear layer that takes the skinny kernel for up to MAX_ROWS rows where it beats cuBLAS."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.weight = linear.weight
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = ("linear", self.out_features, self.in_features, _bucket(x))
        if _fits(x) and self.skinny_wins(key, lambda: torch.randn(key[-1], self.in_features, device=x.device,
                                                                  dtype=x.dtype),
                                         lambda s: skinny_matmul(s, self.weight),
                                         lambda s: torch.nn.functional.linear(s, self.weight)):
            return skinny_matmul(x, self.weight)
        return torch.nn.functional.linear(x, self.weight)


class SkinnyNormedProjection(NormedProjection, _Chooser):
    """A NormedProjection that runs as one skinny kernel (norm, residual add, projection and, gated, SwiGLU)
    for up to MAX_ROWS rows where that beats the unfused path."""

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None, ops):
        weight = self.linear.weight
        key = ("gated" if self.gated else "normed", weight.shape[0], weight.shape[1], _bucket(x))

        def sample():
            return torch.randn(2, key[-1], weight.shape[1], device=x.device, dtype=x.dtype).unbind()

        if _fits(x, residual) and self.skinny_wins(key, sample, lambda s: self._fused(*s),
                                                   lambda s: NormedProjection.forward(self, *s, ops)):
            return self._fused(x, residual)
        return super().forward(x, residual, ops)

    def _fused(self, x: torch.Tensor, residual: torch.Tensor | None):
        return skinny_matmul(x, self.linear.weight, norm=self.norm.weight, eps=self.norm.eps, residual=residual,
                             gated=self.gated)
