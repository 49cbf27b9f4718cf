"""A mixture of experts' grouped GEMMs in Triton (CUDA): one kernel for every expert's gate_up, one for every
expert's down, as vLLM's fused_moe.

Each token's k expert choices are assignments (row token * k + j of the flat list). `align` sorts them by
expert and pads each expert's run to a multiple of BLOCK_M, on the device and with no host read (so CUDA graphs
capture it): a program takes BLOCK_M sorted assignments of one expert, gathers their input rows, multiplies by
that expert's weight tile and scatters the products back to the assignments' rows. The sorted list has room
for the worst padding (every expert a run), its unused blocks exit at once; one token's experts are distinct, so
its assignments take a block each with no sorting (a batch-1 decode step's experts are ~20 launches fewer). The
down kernel gates the gate_up's rows as it loads them (SwiGLU, gpt-oss's clamped variant) and scales each product
by its routing weight, and the k products of a token are summed after (the routing before is one launch:
triton_routing.py). fp8 experts (moe.py's to_fp8) load e4m3 weight tiles, widen them to the activations' dtype
for the tensor cores, and scale each output column by its weight row's scale after the inner loop. MXFP4 experts (moe.py's to_mxfp4: gpt-oss's format, mxfp4.py) stay 4-bit
in memory, as vLLM's on Hopper: each tile's packed bytes and group exponents are widened to the activations' dtype
by bit arithmetic before the tensor cores (a weight-only scheme: the routed tokens are few per expert).

Tiles per shape and token count come from a table measured on the GPU (moe_tiles/, one JSON a mixture shape,
dtype and device, as vLLM's fused_moe configs; `python -m bench.engine.moe_tiles --write` makes one): a call takes
the entry measured at the nearest token count. Without a table: 16 x 64 x 64, Triton's default warps and stages.
Steps of many tokens over bf16 experts take torch's grouped GEMM instead where it times faster
(torch_grouped_moe.py).
"""
# pyright: reportArgumentType=false, reportCallIssue=false, reportOperatorIssue=false, reportIndexIssue=false
# pyright: reportGeneralTypeIssues=false
# (Triton's stubs type kernel parameters as tl.constexpr, tensors' indexing and static_range narrowly; kernels pass
# plain values.)

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import NamedTuple

import torch
import triton  # pyright: ignore[reportMissingImports]
import triton.language as tl  # pyright: ignore[reportMissingImports]

from engine_svc.model.torch_grouped_moe import GroupedMmChooser, grouped_mm_experts, serves
from engine_svc.model.triton_moe_gemv import handles, one_token_experts


class Tiles(NamedTuple):
    """A launch's tile sizes (assignments, output columns, inner) and Triton's warps and pipeline stages."""

    m: int = 16
    n: int = 64
    k: int = 64
    warps: int = 4
    stages: int = 3


TILES = Tiles()
BLOCK_M = TILES.m  # `align`'s padding
TABLES = Path(__file__).with_name("moe_tiles")


def table_path(experts: int, inner: int, weights: str, device: str) -> Path:
    """Where the measured tiles of a shape (experts, each expert's inner width), weight format ("bf16", "fp8",
    "mxfp4": `weight_format`) and device live."""
    return TABLES / f"E={experts},N={inner},{weights},{device.replace(' ', '_')}.json"


def weight_format(weight: torch.Tensor, scale: torch.Tensor | None) -> str:
    """An expert weight's format: "mxfp4" (uint8, packed e2m1 pairs: mxfp4.py), "fp8" (e4m3, row scales) or
    "bf16" (the model's dtype, whichever it is)."""
    return "mxfp4" if weight.dtype == torch.uint8 else "bf16" if scale is None else "fp8"


@functools.cache
def _table(experts: int, inner: int, weights: str, device: int) -> tuple[tuple[int, Tiles], ...]:
    path = table_path(experts, inner, weights, torch.cuda.get_device_name(device))
    if not path.exists():
        return ()
    return tuple(sorted((int(tokens), Tiles(**tiles)) for tokens, tiles in json.loads(path.read_text()).items()))


def tiles_for(tokens: int, experts: int, inner: int, weights: str, device: torch.device) -> Tiles:
    """The measured tiles at the token count nearest `tokens` for this shape on this GPU, else the default (the
    table read once a shape and device)."""
    if device.type != "cuda":  # Triton's interpreter
        return TILES
    table = _table(experts, inner, weights, device.index if device.index is not None else torch.cuda.current_device())
    return min(table, key=lambda entry: abs(entry[0] - tokens))[1] if table else TILES


@triton.jit
def _grouped_gemm(a_ptr, w_ptr, bias_ptr, c_ptr, sorted_ptr, block_expert_ptr, scale_ptr, w_scale_ptr, assignments,
                  n, k, stride_a, stride_we, stride_wn, stride_wk, stride_c, stride_bias, stride_ws, stride_wsn,
                  alpha, limit, TOP_K: tl.constexpr, A_BY_TOKEN: tl.constexpr, SCALE: tl.constexpr,
                  BIAS: tl.constexpr, W_FP8: tl.constexpr, W_MXFP4: tl.constexpr, DIRECT: tl.constexpr,
                  GATING: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """c[assignment] = a[row] @ w[expert]^T for the block's assignments; row = assignment // TOP_K where
    A_BY_TOKEN (the gate_up: each token's input once), else the assignment itself (the down); W_FP8 scales each
    column by its e4m3 weight row's scale; W_MXFP4 reads packed e2m1 pairs [n, k / 2] and their e8m0 group
    exponents [n, k / 32] (mxfp4.py), widens the low and the high nibbles to a's dtype and multiplies them by a's
    even and odd columns (no interleave in registers), BIAS adds the expert's bias row (gpt-oss), SCALE multiplies by the
    assignment's routing weight after. DIRECT: block i is assignment i alone and block_expert_ptr the flat expert
    ids (one token: no sorting). GATING (the down): a holds the gate_up's [gate | up] rows and the block gates them
    as it loads them, 1 SwiGLU, 2 gpt-oss's clamped variant (`alpha`, `limit`)."""
    expert = tl.load(block_expert_ptr + tl.program_id(0))
    if expert < 0:  # past the last expert's run
        return
    if DIRECT:
        first = tl.arange(0, BLOCK_M) == 0
        assignment = tl.where(first, tl.program_id(0), assignments)
    else:
        assignment = tl.load(sorted_ptr + tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))
    real = assignment < assignments  # padding slots hold `assignments`
    rows = assignment // TOP_K if A_BY_TOKEN else assignment
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for start in range(0, k, BLOCK_K):
        if W_MXFP4:
            half = start // 2 + tl.arange(0, BLOCK_K // 2)  # the tile's bytes: inner 2j (low nibble), 2j + 1 (high)
            even = 2 * half
            where = real[:, None] & (even[None, :] < k)
            on_w = (cols[None, :] < n) & (even[:, None] < k)
            packed = tl.load(w_ptr + expert.to(tl.int64) * stride_we + cols[None, :] * stride_wn
                             + half[:, None] * stride_wk, mask=on_w, other=0)  # fmt: skip
            exps = tl.load(w_scale_ptr + expert.to(tl.int64) * stride_ws + cols[None, :] * stride_wsn
                           + (half // 16)[:, None], mask=on_w, other=1)  # fmt: skip
            base = (exps.to(tl.int32) - 1) << 23  # both nibbles' group scale, once
            a = _a_tile(a_ptr, rows, stride_a, even, where, k, alpha, limit, GATING)
            acc = tl.dot(a, _e2m1(packed & 15, base, a_ptr.dtype.element_ty), acc)
            a = _a_tile(a_ptr, rows, stride_a, even + 1, where, k, alpha, limit, GATING)
            acc = tl.dot(a, _e2m1(packed >> 4, base, a_ptr.dtype.element_ty), acc)
        else:
            inner = start + tl.arange(0, BLOCK_K)
            a = _a_tile(a_ptr, rows, stride_a, inner, real[:, None] & (inner[None, :] < k), k, alpha, limit, GATING)
            w = tl.load(
                w_ptr + expert.to(tl.int64) * stride_we + cols[None, :] * stride_wn + inner[:, None] * stride_wk,
                mask=(cols[None, :] < n) & (inner[:, None] < k),
                other=0.0,
            )
            if W_FP8:
                w = w.to(a_ptr.dtype.element_ty)
            acc = tl.dot(a, w, acc)
    if W_FP8:
        w_scale = tl.load(w_scale_ptr + expert.to(tl.int64) * stride_ws + cols, mask=cols < n, other=0.0)
        acc = acc * w_scale[None, :]
    if BIAS:
        bias = tl.load(bias_ptr + expert.to(tl.int64) * stride_bias + cols, mask=cols < n, other=0.0)
        acc = acc + bias.to(tl.float32)[None, :]
    if SCALE:
        acc = acc * tl.load(scale_ptr + assignment, mask=real, other=0.0).to(tl.float32)[:, None]
    out = c_ptr + assignment[:, None] * stride_c + cols[None, :]
    tl.store(out, acc.to(c_ptr.dtype.element_ty), mask=real[:, None] & (cols[None, :] < n))


@triton.jit
def _a_tile(a_ptr, rows, stride_a, inner, where, k, alpha, limit, GATING: tl.constexpr):
    """a's tile at columns `inner` of `rows`; GATING (the down): gated from the gate_up's [gate | up] rows."""
    a = tl.load(a_ptr + rows[:, None] * stride_a + inner[None, :], mask=where, other=0.0)
    if GATING:
        gate = a.to(tl.float32)
        up = tl.load(a_ptr + rows[:, None] * stride_a + k + inner[None, :], mask=where, other=0.0).to(tl.float32)
        if GATING == 2:
            gate, up = tl.minimum(gate, limit), tl.minimum(tl.maximum(up, -limit), limit)
            a = ((up + 1.0) * gate * tl.sigmoid(gate * alpha)).to(a_ptr.dtype.element_ty)
        else:
            a = (gate * tl.sigmoid(gate) * up).to(a_ptr.dtype.element_ty)
    return a


@triton.jit
def _e2m1(codes, base, dtype: tl.constexpr):
    """4-bit e2m1 codes (sign, 2 exponent bits e, 1 mantissa bit m) times their group's scale 2^(s - 127), as
    float32 bits (exact: 2 significant bits), then `dtype`; `base` = (s - 1) << 23, half the scale's exponent
    field. e > 0: 2^(e - 1) * (1 + m / 2), the field e + s - 1 over the mantissa bit m; e = 0: m / 2."""
    codes = codes.to(tl.int32)
    bits = tl.where((codes & 6) == 0, tl.where((codes & 1) == 1, base, 0), ((codes & 7) << 22) + base)
    return (bits | ((codes & 8) << 28)).to(tl.float32, bitcast=True).to(dtype)


def align(ids: torch.Tensor, num_experts: int, block_m: int = BLOCK_M) -> tuple[torch.Tensor, torch.Tensor]:
    """(sorted: the assignments grouped by expert, each run padded with `ids.numel()` to a multiple of block_m;
    block_expert: each block's expert, -1 past the last run), with no host read."""
    flat = ids.flatten()
    assignments = flat.numel()
    counts = torch.zeros(num_experts, dtype=torch.int64, device=ids.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    ends = padded.cumsum(0)
    order = torch.argsort(flat, stable=True)
    experts = flat[order]
    rank = torch.arange(assignments, device=ids.device) - (counts.cumsum(0) - counts)[experts]
    capacity = -(-(assignments + num_experts * (block_m - 1)) // block_m) * block_m
    sorted_ids = torch.full((capacity,), assignments, dtype=torch.int64, device=ids.device)
    sorted_ids.scatter_(0, (ends - padded)[experts] + rank, order)
    starts = torch.arange(0, capacity, block_m, device=ids.device)
    block_expert = torch.searchsorted(ends, starts, right=True)
    return sorted_ids, torch.where(block_expert < num_experts, block_expert, -1)


def _gemm(a, w, bias, w_scale, out, blocks, scale, top_k: int, by_token: bool, gating, tiles: Tiles) -> None:
    """One grouped GEMM over `blocks`: (sorted ids, block experts) from align, or (None, the flat expert ids) for
    one token's assignments (a block each); `gating` None, or the Gating the down applies to the gate_up's rows."""
    (sorted_ids, block_expert), n, k = blocks, w.shape[1], w.shape[2]
    mode, packed = 0 if gating is None else 2 if gating.limit else 1, weight_format(w, w_scale) == "mxfp4"
    k *= 2 if packed else 1  # two e2m1 values a byte
    grid = (block_expert.shape[0], triton.cdiv(n, tiles.n))
    _grouped_gemm[grid](  # pyright: ignore[reportIndexIssue]
        a, w, w if bias is None else bias, out, block_expert if sorted_ids is None else sorted_ids, block_expert,
        scale, scale if w_scale is None else w_scale, out.shape[0], n, k, a.stride(0), w.stride(0), w.stride(1),
        w.stride(2), out.stride(0), 0 if bias is None else bias.stride(0), 0 if w_scale is None else w_scale.stride(0),
        0 if w_scale is None or not packed else w_scale.stride(1), 0.0 if gating is None else gating.alpha,
        0.0 if gating is None else gating.limit, TOP_K=top_k, A_BY_TOKEN=by_token, SCALE=not by_token,
        BIAS=bias is not None, W_FP8=w_scale is not None and not packed, W_MXFP4=packed, DIRECT=sorted_ids is None,
        GATING=mode, BLOCK_M=tiles.m, BLOCK_N=tiles.n, BLOCK_K=tiles.k, num_warps=tiles.warps, num_stages=tiles.stages,
    )  # fmt: skip


def fused_experts(
    x,
    gate_up,
    down,
    weights,
    ids,
    gating,
    gate_up_bias=None,
    down_bias=None,
    gate_up_scale=None,
    down_scale=None,
    tiles: Tiles | None = None,
) -> torch.Tensor:
    """sum over each token's k experts of weight * down(gating(gate_up(x))) (moe.py's grouped_experts): x
    [tokens, hidden], gate_up [experts, 2 * inner, hidden], down [experts, hidden, inner], weights and ids
    [tokens, k], the biases [experts, out] or None, the fp8 weights' row scales [experts, out] or None; MXFP4
    experts: the weights uint8 [experts, out, in / 2], the scales their e8m0 exponents [experts, out, in / 32];
    `tiles` None: the measured table's, or one token's GEMVs (triton_moe_gemv.py) where they serve the experts."""
    tokens, top_k = ids.shape
    if tiles is None and tokens == 1 and handles(gate_up, gate_up_bias, down_bias):
        return one_token_experts(x, gate_up, down, weights, ids, gating, gate_up_bias, down_bias, gate_up_scale,
                                 down_scale)  # fmt: skip
    if tiles is None:
        weights_format = weight_format(gate_up, gate_up_scale)
        tiles = tiles_for(tokens, gate_up.shape[0], gate_up.shape[1] // 2, weights_format, x.device)
        if serves(x, gate_up, gate_up_scale, gate_up_bias, down_bias) and GroupedMmChooser.wins(
            x, gate_up, down, top_k, gating, lambda s, w, i: fused_experts(s, gate_up, down, w, i, gating, tiles=tiles)
        ):  # many tokens: torch's grouped GEMM where it times faster (torch_grouped_moe.py)
            return grouped_mm_experts(x, gate_up, down, weights, ids, gating)
    # one token's experts are distinct: a block each, with no sorting (its ~20 launches cost more than a batch-1
    # step's expert GEMMs)
    blocks = (None, ids.flatten()) if tokens == 1 else align(ids, gate_up.shape[0], tiles.m)
    x, scale = x.contiguous(), weights.flatten().contiguous()
    h = x.new_empty(tokens * top_k, gate_up.shape[1])
    _gemm(x, gate_up, gate_up_bias, gate_up_scale, h, blocks, scale, top_k, True, None, tiles)
    out = x.new_empty(tokens * top_k, down.shape[1])
    _gemm(h, down, down_bias, down_scale, out, blocks, scale, top_k, False, gating, tiles)  # gated as it loads h
    return out.view(tokens, top_k, -1).sum(dim=1)
