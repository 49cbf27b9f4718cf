"""Prefill chunks' attention straight from the paged KV cache, FlashAttention-style, in one Triton kernel (CUDA).

The decode kernel (`triton_attention._paged_attention`) gives each query row a program of its own that reads
the row's whole prefix: for a prefill chunk of n tokens that reads the prefix n times (O(n^2) bytes) and puts
only the GQA group on the tensor cores. Here one program takes a tile of BLOCK_M consecutive query tokens of
one chunk for one KV head and walks that sequence's keys once, BLOCK_N at a time, through its block table:
QK^T and PV are tensor-core dots, the softmax is online (fp32), only the tiles crossing the causal diagonal are
masked, and tiles past the tile's last row are never read. K/V bytes read drop by a factor of BLOCK_M.

The query heads that share the KV head go into the same tile: row r is token r // GROUP_PAD, head
r % GROUP_PAD (heads past the group, when it is not a power of two, are padding). So a program loads each K/V
tile once for the whole group and its dots have M = BLOCK_M * GROUP_PAD rows (128 in every usual shape: 128
tokens at group 1, 32 at 4, 16 at 8), whatever the group; the rows of one token are adjacent in q and out, so
the tile's loads and stores stay contiguous. Looping the heads instead would read every K/V tile GROUP times
(or hold GROUP accumulators).

A chunk may continue a sequence (context_start cached tokens before it: a later chunk of a long prompt or a
prefix-cache hit); query token i of the chunk sees keys 0..context_start + i. Every chunk of a step goes in
one launch: the grid is (query tiles of the longest chunk, chunks, KV heads), and a shorter chunk's programs
past its end return at once.
"""
# pyright: reportArgumentType=false, reportCallIssue=false, reportOperatorIssue=false, reportIndexIssue=false
# (Triton's stubs type kernel parameters as tl.constexpr and tensors' indexing narrowly; kernels pass plain values.)

from __future__ import annotations

import torch
import triton  # pyright: ignore[reportMissingImports]
import triton.language as tl  # pyright: ignore[reportMissingImports]

ROWS_PER_TILE = 128  # M of the dots: BLOCK_M tokens x GROUP_PAD heads
LOG2E = 1.4426950408889634


@triton.jit
def _attend(q, acc, best, total, cache_ptr, tables_ptr, first_block, kv_head, seq_end, lo, hi, limit, qk_scale,
            stride_slot, stride_kv, stride_cache_head,
            HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
            IEEE: tl.constexpr, KV_FP8: tl.constexpr):  # fmt: skip
    """Keys lo..hi-1 (a multiple of BLOCK_N apart) into the running softmax; CAUSAL: row r sees keys <= limit[r],
    and keys from `seq_end` on (past the last row's) are not read."""
    dims = tl.arange(0, HEAD_DIM)
    for base in range(lo, hi, BLOCK_N):
        tokens = base + tl.arange(0, BLOCK_N)
        if CAUSAL:
            valid = tokens < seq_end
            blocks = tl.load(tables_ptr + first_block + tokens // BLOCK_SIZE, mask=valid, other=0)
        else:
            blocks = tl.load(tables_ptr + first_block + tokens // BLOCK_SIZE)
        rows = (
            cache_ptr
            + (blocks * BLOCK_SIZE + tokens % BLOCK_SIZE)[:, None] * stride_slot
            + kv_head * stride_cache_head
            + dims[None, :]
        )
        if CAUSAL:
            k = tl.load(rows, mask=valid[:, None], other=0.0)
            v = tl.load(rows + stride_kv, mask=valid[:, None], other=0.0)
        else:
            k = tl.load(rows)
            v = tl.load(rows + stride_kv)
        if KV_FP8:
            k, v = k.to(q.dtype), v.to(q.dtype)
        if IEEE:
            scores = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        else:
            scores = tl.dot(q, tl.trans(k)) * qk_scale
        if CAUSAL:
            scores = tl.where(tokens[None, :] <= limit[:, None], scores, float("-inf"))
        # Every row sees key 0 (in the first tile read), so `best` is finite after it and a row masked out of
        # a later tile adds exp2(-inf) = 0.
        new_best = tl.maximum(best, tl.max(scores, 1))
        weights = tl.math.exp2(scores - new_best[:, None])
        rescale = tl.math.exp2(best - new_best)
        total = total * rescale + tl.sum(weights, 1)
        if IEEE:
            acc = acc * rescale[:, None] + tl.dot(weights.to(v.dtype), v, input_precision="ieee")
        else:
            acc = acc * rescale[:, None] + tl.dot(weights.to(v.dtype), v)
        best = new_best
    return acc, best, total


# The block list and the chunk table are views into a step's packed inputs, 16-byte aligned or not from one step
# to the next: not specialised on it, so no second compile while serving.
@triton.jit(do_not_specialize=["tables_ptr", "chunks_ptr"])
def _paged_prefill(q_ptr, cache_ptr, tables_ptr, chunks_ptr, out_ptr, qk_scale,
                   stride_q_seq, stride_q_head, stride_slot, stride_kv, stride_cache_head,
                   GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IEEE: tl.constexpr, KV_FP8: tl.constexpr):  # fmt: skip
    tile = tl.num_programs(0) - 1 - tl.program_id(0)  # the longest tiles (latest rows) first
    chunk = tl.program_id(1)
    kv_head = tl.program_id(2)
    first_row = tl.load(chunks_ptr + chunk * 4)
    num_tokens = tl.load(chunks_ptr + chunk * 4 + 1)
    context = tl.load(chunks_ptr + chunk * 4 + 2)
    first_block = tl.load(chunks_ptr + chunk * 4 + 3)
    if tile * BLOCK_M >= num_tokens:
        return
    r = tl.arange(0, BLOCK_M * GROUP_PAD)
    token = tile * BLOCK_M + r // GROUP_PAD  # query token of the chunk
    head = r % GROUP_PAD
    real = (token < num_tokens) & (head < GROUP)
    offsets = (first_row + token) * stride_q_seq + (kv_head * GROUP + head) * stride_q_head
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + offsets[:, None] + dims[None, :], mask=real[:, None], other=0.0)
    if KV_FP8 and not IEEE:  # an fp8 cache widens to float16 in one instruction: q goes to float16 too
        q = q.to(tl.float16)
    limit = context + token  # the last key row r sees
    first_limit = context + tile * BLOCK_M
    end = tl.minimum(context + tile * BLOCK_M + BLOCK_M, context + num_tokens)  # keys past the tile's last row
    full = (first_limit + 1) // BLOCK_N * BLOCK_N  # tiles below every row's limit: no mask
    best = tl.full([BLOCK_M * GROUP_PAD], float("-inf"), tl.float32)
    total = tl.zeros([BLOCK_M * GROUP_PAD], tl.float32)
    acc = tl.zeros([BLOCK_M * GROUP_PAD, HEAD_DIM], tl.float32)
    acc, best, total = _attend(q, acc, best, total, cache_ptr, tables_ptr, first_block, kv_head, end, 0, full, limit,
                               qk_scale, stride_slot, stride_kv, stride_cache_head,
                               HEAD_DIM, BLOCK_SIZE, BLOCK_N, False, IEEE, KV_FP8)  # fmt: skip
    acc, best, total = _attend(q, acc, best, total, cache_ptr, tables_ptr, first_block, kv_head, end, full, end, limit,
                               qk_scale, stride_slot, stride_kv, stride_cache_head,
                               HEAD_DIM, BLOCK_SIZE, BLOCK_N, True, IEEE, KV_FP8)  # fmt: skip
    out = acc / total[:, None]
    tl.store(out_ptr + offsets[:, None] + dims[None, :], out.to(out_ptr.dtype.element_ty), mask=real[:, None])


def prefill_attention(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    blocks: torch.Tensor,
    chunks: torch.Tensor,
    max_tokens: int,
    block_size: int,
    scale: float,
    out: torch.Tensor | None = None,
    block_n: int = 64,
    num_warps: int | None = None,
    num_stages: int = 2,
) -> torch.Tensor:
    """Causal attention of prefill chunks over kv_cache [slots, 2 (K, V), kv_heads, dim] (the model's dtype, or
    float8 e4m3: widened after each load, to float16 with q), their own K/V already written there. chunks [n, 4]
    (int64): per chunk its first row in q [rows, heads, dim], its token count, the tokens of its sequence cached
    before it (context start), and the index in `blocks` of the first of its sequence's blocks (which follow in
    order). `max_tokens`: the largest token count (a host int, for the grid).
    Writes the chunks' rows of `out` (default: a new tensor like q; other rows left as they are)."""
    heads, dim = q.shape[1], q.shape[2]
    kv_heads = kv_cache.shape[2]
    group = heads // kv_heads
    group_pad = triton.next_power_of_2(group)
    block_m = max(1, ROWS_PER_TILE // group_pad)
    if out is None:
        out = torch.empty_like(q)
    assert q.stride(2) == 1 and out.stride() == q.stride() and kv_cache.stride(3) == 1
    grid = (triton.cdiv(max_tokens, block_m), chunks.shape[0], kv_heads)
    _paged_prefill[grid](  # pyright: ignore[reportIndexIssue]
        q,
        kv_cache,
        blocks,
        chunks,
        out,
        scale * LOG2E,
        q.stride(0),
        q.stride(1),
        kv_cache.stride(0),
        kv_cache.stride(1),
        kv_cache.stride(2),
        GROUP=group,
        GROUP_PAD=group_pad,
        HEAD_DIM=dim,
        BLOCK_SIZE=block_size,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        IEEE=q.dtype == torch.float32,
        KV_FP8=kv_cache.dtype == torch.float8_e4m3fn,
        num_warps=num_warps or (8 if dim >= 128 else 4),
        num_stages=num_stages,
    )
    return out
