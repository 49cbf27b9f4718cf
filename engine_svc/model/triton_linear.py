"""Skinny matmuls for small decode batches on CUDA: a few rows times a weight matrix, read at memory speed.

At batch 1-16 a decode step's projections are matrix-vector products bound by reading the weights, and the
small kernels between them (residual add + norm, SiLU * up) cost about as much as a small projection each.
Two kernels, each program owning a few output features and streaming their weight rows once:

- `_skinny_matmul` (2-16 rows): tensor-core dots over the padded rows.
- `_gemv` (one row, the batch-1 decode): plain multiply-adds kept per lane and reduced once at the end, which
  leaves room to fuse. With `NORM` it takes x (+ residual) itself: adds the residual (program 0 writes the sum,
  the next residual), scales by the norm weight, sums the squares on the way and applies 1/rms at the end (a
  per-row scalar, so it factors out of the dot product). With `GATED` it also reads the matching `up` rows and
  writes silu(gate) * up.

Configurations are tuned per shape the first time it runs (in the runner's warm-up, before graph capture), and
the modules keep the torch path wherever that times faster.
"""
# pyright: reportArgumentType=false, reportCallIssue=false, reportOperatorIssue=false, reportIndexIssue=false
# (Triton's stubs type kernel parameters as tl.constexpr and tensors' indexing narrowly; kernels pass plain values.)

from __future__ import annotations

import logging
from typing import ClassVar

import torch
import triton  # pyright: ignore[reportMissingImports]
import triton.language as tl  # pyright: ignore[reportMissingImports]
from triton.testing import do_bench_cudagraph  # pyright: ignore[reportMissingImports]

from engine_svc.model.decoder import NormedProjection, PartialSums, Projection
from engine_svc.model.moe import SparseMoe
from engine_svc.model.triton_pdl import pdl, wait_for_inputs

log = logging.getLogger(__name__)

MAX_ROWS = 16  # beyond this, cuBLAS's GEMM tiles win

SKINNY_CONFIGS = [
    triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s)
    for n, k, w, s in [
        (16, 256, 4, 4),
        (16, 512, 4, 3),
        (16, 512, 8, 4),
        (32, 256, 4, 4),
        (32, 512, 8, 3),
        (64, 256, 8, 3),
        (16, 1024, 8, 3),
        (32, 128, 4, 6),
        (64, 128, 4, 4),
        (128, 128, 8, 4),
        (128, 64, 4, 6),
        (64, 512, 8, 3),
    ]
]
GEMV_CONFIGS = [
    triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s)
    for n, k, w, s in [
        (4, 512, 4, 1),
        (8, 256, 4, 1),
        (8, 512, 4, 1),
        (16, 128, 4, 1),
        (16, 256, 4, 1),
        (16, 256, 8, 1),
        (32, 128, 4, 1),
        (32, 256, 8, 1),
        (16, 512, 8, 1),
        (64, 64, 4, 1),
        (8, 256, 4, 3),
        (16, 256, 4, 3),
        (32, 128, 4, 3),
        (8, 1024, 8, 1),
        (2, 1024, 4, 1),
    ]
]


@triton.autotune(configs=SKINNY_CONFIGS, key=["ROWS_PAD", "N", "K"])
@triton.jit
def _skinny_matmul(
    x_ptr,
    w_ptr,
    out_ptr,
    M,
    N,
    K,
    stride_x,
    stride_w,
    stride_out,
    ROWS_PAD: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
):
    wait_for_inputs(PDL)
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


@triton.jit
def _row(x_ptr, res_ptr, k, k_mask, RESIDUAL: tl.constexpr):
    """x's (+ the residual's) values at `k`, the sum rounded to x's dtype as the unfused add."""
    x = tl.load(x_ptr + k, mask=k_mask, other=0.0)
    if RESIDUAL:
        x = (x.to(tl.float32) + tl.load(res_ptr + k, mask=k_mask, other=0.0).to(tl.float32)).to(x.dtype)
    return x


@triton.autotune(configs=GEMV_CONFIGS, key=["N", "K", "NORM", "GATED", "WRITE_NORMED"])
@triton.jit
def _gemv(
    x_ptr,
    res_ptr,
    norm_ptr,
    w_ptr,
    out_ptr,
    res_out_ptr,
    normed_ptr,
    N,
    K,
    eps,
    stride_w,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NORM: tl.constexpr,
    RESIDUAL: tl.constexpr,
    GATED: tl.constexpr,
    WRITE_NORMED: tl.constexpr,
    PDL: tl.constexpr,
):
    wait_for_inputs(PDL)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    writes_residual = tl.program_id(0) == 0
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    up = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    squares = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        k = start + ks
        k_mask = k < K
        x = _row(x_ptr, res_ptr, k, k_mask, RESIDUAL)
        if RESIDUAL:
            tl.store(res_out_ptr + k, x, mask=k_mask & writes_residual)
        x = x.to(tl.float32)
        if NORM:
            squares += x * x
            x *= tl.load(norm_ptr + k, mask=k_mask, other=0.0).to(tl.float32)
        w_at = cols[:, None] * stride_w + k[None, :]
        w_mask = (cols[:, None] < N) & k_mask[None, :]
        acc += tl.load(w_ptr + w_at, mask=w_mask, other=0.0).to(tl.float32) * x[None, :]
        if GATED:
            up += tl.load(w_ptr + N * stride_w + w_at, mask=w_mask, other=0.0).to(tl.float32) * x[None, :]
    result = tl.sum(acc, axis=1)
    if NORM:
        inverse_rms = tl.rsqrt(tl.sum(squares, axis=0) / K + eps)
        result *= inverse_rms
    if GATED:  # rounded like the unfused path's bf16 gate_up output
        gate = result.to(out_ptr.dtype.element_ty).to(tl.float32)
        result = (
            gate * tl.sigmoid(gate) * (tl.sum(up, axis=1) * inverse_rms).to(out_ptr.dtype.element_ty).to(tl.float32)
        )
    tl.store(out_ptr + cols, result.to(out_ptr.dtype.element_ty), mask=cols < N)
    # rms_norm(x + residual) itself too (a mixture's experts take it): a chunk of K a program, so no one program
    # walks the row twice
    if WRITE_NORMED:
        for start in range(tl.program_id(0) * BLOCK_K, K, tl.num_programs(0) * BLOCK_K):
            k = start + ks
            k_mask = k < K
            x = _row(x_ptr, res_ptr, k, k_mask, RESIDUAL).to(tl.float32)
            normed = x * tl.load(norm_ptr + k, mask=k_mask, other=0.0).to(tl.float32) * inverse_rms
            tl.store(normed_ptr + k, normed.to(normed_ptr.dtype.element_ty), mask=k_mask)


def _over_columns(n: int):
    """The launch grid of a kernel whose programs own BLOCK_N output features each."""
    return lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)


def skinny_matmul(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x [M <= MAX_ROWS, K] @ weight [N, K]^T, both contiguous in K: one row through `_gemv`, more through
    `_skinny_matmul`."""
    rows, k = x.shape
    n = weight.shape[0]
    out = x.new_empty(rows, n)
    if rows == 1:
        _gemv[_over_columns(n)](  # pyright: ignore[reportIndexIssue]
            x, x, x, weight, out, out, out, n, k, 0.0, weight.stride(0), NORM=False, RESIDUAL=False, GATED=False,
            WRITE_NORMED=False, **pdl(),
        )  # fmt: skip
        return out
    _skinny_matmul[_over_columns(n)](  # pyright: ignore[reportIndexIssue]
        x,
        weight,
        out,
        rows,
        n,
        k,
        x.stride(0),
        weight.stride(0),
        out.stride(0),
        ROWS_PAD=max(16, triton.next_power_of_2(rows)),
        **pdl(),
    )
    return out


def normed_gemv(
    x: torch.Tensor,
    residual: torch.Tensor | None,
    norm: torch.Tensor,
    eps: float,
    weight: torch.Tensor,
    gated: bool = False,
    normed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(rms_norm(x + residual) @ weight^T, x + residual) for one row x [1, K] (x itself without a residual), in
    one pass. `gated`: the weight is [gate; up] and the result silu(gate) * up. `normed`: rms_norm(x + residual)
    itself is written there too."""
    n, k = weight.shape[0] // 2 if gated else weight.shape[0], x.shape[1]
    out = x.new_empty(1, n)
    total = x if residual is None else torch.empty_like(x)
    _gemv[_over_columns(n)](  # pyright: ignore[reportIndexIssue]
        x,
        x if residual is None else residual,
        norm,
        weight,
        out,
        total,
        out if normed is None else normed,
        n,
        k,
        eps,
        weight.stride(0),
        NORM=True,
        RESIDUAL=residual is not None,
        GATED=gated,
        WRITE_NORMED=normed is not None,
        **pdl(),
    )
    return out, total


def _contiguous_cuda(*tensors: torch.Tensor | None) -> bool:
    return all(t is None or (t.is_cuda and t.is_contiguous()) for t in tensors)


class _Chooser:
    """Times a skinny kernel against the torch path once per (shape, row bucket) in CUDA graphs and remembers
    which is faster; until a shape is timed (or while a graph is being captured) the torch path runs."""

    faster: ClassVar[dict[tuple, bool]] = {}  # shared by every layer of every model

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
    """A bias-free linear layer that takes the skinny kernels for up to MAX_ROWS rows where they beat cuBLAS."""

    bias = None  # bias-free projections only

    def __init__(self, linear: Projection):
        super().__init__()
        self.linear, self.weight = linear, linear.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = triton.next_power_of_2(x.shape[0])
        key = ("linear", *self.weight.shape, rows)
        if (
            rows <= MAX_ROWS
            and _contiguous_cuda(x)
            and self.skinny_wins(
                key,
                lambda: torch.randn(rows, self.weight.shape[1], device=x.device, dtype=x.dtype),
                lambda s: skinny_matmul(s, self.weight),
                self.linear,
            )
        ):
            return skinny_matmul(x, self.weight)
        return self.linear(x)


class SkinnyNormedProjection(NormedProjection, _Chooser):
    """A NormedProjection that runs a single row as one kernel (residual add, norm, projection and, gated,
    SwiGLU) where that beats the unfused path; its projection takes the skinny kernels (a SkinnyLinear)."""

    def __init__(self, norm, linear: Projection, gated: bool = False):
        super().__init__(norm, SkinnyLinear(linear), gated)

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None, ops):
        weight = self.linear.weight
        key = ("gated" if self.gated else "normed", *weight.shape, 1)
        if (
            x.shape[0] == 1
            and _contiguous_cuda(x, residual)
            and self.skinny_wins(
                key,
                lambda: torch.randn(2, 1, weight.shape[1], device=x.device, dtype=x.dtype).unbind(),
                lambda s: self._fused(*s),
                lambda s: NormedProjection.forward(self, s[0], s[1], ops),
            )
        ):
            return self._fused(x, residual)
        return super().forward(x, residual, ops)

    def _fused(self, x: torch.Tensor, residual: torch.Tensor | None):
        return normed_gemv(x, residual, self.norm.weight, self.norm.eps, self.linear.weight, self.gated)


class SkinnyNormedRouter(NormedProjection, _Chooser):
    """A mixture's norm and router (moe.py's SparseMoe, bias-free softmax routing) as one kernel for a single row,
    which writes the normed row for the experts beside the router's logits, where that beats the norm and the
    router's matmul apart; the experts run as before."""

    def __init__(self, norm, experts: SparseMoe):
        super().__init__(norm, experts)
        self.experts = experts

    def forward(self, x: torch.Tensor | PartialSums, residual: torch.Tensor | None, ops):
        router = self.experts.router
        if (
            isinstance(x, torch.Tensor)  # not an fp8 o_proj's PartialSums
            and x.shape[0] == 1
            and _contiguous_cuda(x, residual)
            and self.skinny_wins(
                ("router", *router.shape, 1),
                lambda: torch.randn(2, 1, router.shape[1], device=x.device, dtype=x.dtype).unbind(),
                lambda s: self._fused(*s),
                lambda s: torch.nn.functional.linear(
                    ops.add_rms_norm(s[0], s[1], self.norm.weight, self.norm.eps)[0], router
                ),
            )
        ):
            normed = torch.empty_like(x)
            logits, total = self._fused(x, residual, normed)
            return self.experts(normed, logits), total
        return super().forward(x, residual, ops)

    def _fused(self, x: torch.Tensor, residual: torch.Tensor | None, normed: torch.Tensor | None = None):
        normed = torch.empty_like(x) if normed is None else normed
        return normed_gemv(x, residual, self.norm.weight, self.norm.eps, self.experts.router, normed=normed)
