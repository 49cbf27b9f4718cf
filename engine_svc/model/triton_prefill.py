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

A layer's variants, as transformers computes them (`SdpaBackend` is the reference): a sliding window (query p sees
keys p - window < k <= p) reads only the key tiles that reach some row's window, so a long context costs
window, not position, per row: masked tiles at both edges, unmasked ones between; soft-capping (Gemma 2) puts
cap * tanh(score / cap) on the scaled scores before the mask; sinks (gpt-oss) start each row's online softmax
at the head's sink logit with weight 1 and no value, so the sink takes its share of the denominator.
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
def soft_cap(scores, cap):
    """cap * tanh(scores / cap), through exp (the interpreter and every Triton build have it): exact at the
    limits (exp overflows to inf: cap; underflows to 0: -cap)."""
    return cap - 2.0 * cap / (tl.exp(2.0 * scores / cap) + 1.0)


@triton.jit
def _attend(q, acc, best, total, cache_ptr, tables_ptr, first_block, kv_head, seq_end, lo, hi, limit, qk_scale,
            stride_slot, stride_kv, stride_cache_head, window, cap,
            HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
            IEEE: tl.constexpr, KV_FP8: tl.constexpr, WINDOWED: tl.constexpr, SOFTCAP: tl.constexpr):  # fmt: skip
    """Keys lo..hi-1 (a multiple of BLOCK_N apart) into the running softmax; CAUSAL (masked): row r sees keys
    <= limit[r] (and > limit[r] - window, WINDOWED), and keys from `seq_end` on (past the last row's) are not
    read. `cap`: the soft-cap in log2 units (SOFTCAP)."""
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
        if SOFTCAP:
            scores = soft_cap(scores, cap)
        if CAUSAL:
            seen = tokens[None, :] <= limit[:, None]
            if WINDOWED:
                seen = seen & (tokens[None, :] > limit[:, None] - window)
            scores = tl.where(seen, scores, float("-inf"))
        # Without a window every row sees key 0 (in the first tile read), so `best` is finite after it and a row
        # masked out of a later tile adds exp2(-inf) = 0. A windowed row may meet a tile wholly outside its
        # window first: it subtracts 0 there, not -inf (which would give NaN), and stays at -inf.
        new_best = tl.maximum(best, tl.max(scores, 1))
        shift = new_best
        if WINDOWED:
            shift = tl.where(new_best == float("-inf"), 0.0, new_best)
        weights = tl.math.exp2(scores - shift[:, None])
        rescale = tl.math.exp2(best - shift)
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
def _paged_prefill(q_ptr, cache_ptr, tables_ptr, chunks_ptr, out_ptr, sinks_ptr, qk_scale, window, cap,
                   stride_q_seq, stride_q_head, stride_slot, stride_kv, stride_cache_head,
                   GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IEEE: tl.constexpr, KV_FP8: tl.constexpr,
                   WINDOWED: tl.constexpr, SINKS: tl.constexpr, SOFTCAP: tl.constexpr):  # fmt: skip
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
    full = (first_limit + 1) // BLOCK_N * BLOCK_N  # tiles below every row's limit: no causal mask
    best = tl.full([BLOCK_M * GROUP_PAD], float("-inf"), tl.float32)
    total = tl.zeros([BLOCK_M * GROUP_PAD], tl.float32)
    if SINKS:  # the sink logit (natural units -> log2) with weight exp2(0) = 1 and no value
        sink = tl.load(sinks_ptr + kv_head * GROUP + head, mask=head < GROUP, other=0.0).to(tl.float32)
        best = sink * 1.4426950408889634
        total = tl.full([BLOCK_M * GROUP_PAD], 1.0, tl.float32)
    acc = tl.zeros([BLOCK_M * GROUP_PAD, HEAD_DIM], tl.float32)
    lo = 0  # tiles before the first row's window are never read
    inside = 0  # from here on every row's window holds the whole tile
    if WINDOWED:
        lo = tl.maximum(first_limit - window + 1, 0) // BLOCK_N * BLOCK_N
        inside = tl.minimum(tl.cdiv(tl.maximum(end - window, 0), BLOCK_N) * BLOCK_N, full)
        acc, best, total = _attend(q, acc, best, total, cache_ptr, tables_ptr, first_block, kv_head, end, lo,
                                   inside, limit, qk_scale, stride_slot, stride_kv, stride_cache_head, window, cap,
                                   HEAD_DIM, BLOCK_SIZE, BLOCK_N, True, IEEE, KV_FP8, WINDOWED, SOFTCAP)  # fmt: skip
    acc, best, total = _attend(q, acc, best, total, cache_ptr, tables_ptr, first_block, kv_head, end, inside, full,
                               limit, qk_scale, stride_slot, stride_kv, stride_cache_head, window, cap,
                               HEAD_DIM, BLOCK_SIZE, BLOCK_N, False, IEEE, KV_FP8, WINDOWED, SOFTCAP)  # fmt: skip
    acc, best, total = _attend(q, acc, best, total, cache_ptr, tables_ptr, first_block, kv_head, end, full, end,
                               limit, qk_scale, stride_slot, stride_kv, stride_cache_head, window, cap,
                               HEAD_DIM, BLOCK_SIZE, BLOCK_N, True, IEEE, KV_FP8, WINDOWED, SOFTCAP)  # fmt: skip
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
    window: int = 0,
    sinks: torch.Tensor | None = None,
    softcap: float = 0.0,
    block_n: int | None = None,
    num_warps: int | None = None,
    num_stages: int = 2,
) -> torch.Tensor:
    """Causal attention of prefill chunks over kv_cache [slots, 2 (K, V), kv_heads, dim] (the model's dtype, or
    float8 e4m3: widened after each load, to float16 with q), their own K/V already written there. chunks [n, 4]
    (int64): per chunk its first row in q [rows, heads, dim], its token count, the tokens of its sequence cached
    before it (context start), and the index in `blocks` of the first of its sequence's blocks (which follow in
    order). `max_tokens`: the largest token count (a host int, for the grid).
    Writes the chunks' rows of `out` (default: a new tensor like q; other rows left as they are). `window`: keys
    within the last `window` positions of each query (0: all); `sinks`: [heads] sink logits (None: none);
    `softcap`: cap * tanh(score / cap) on the scaled scores (0: none). A 256-wide head (Gemma) takes 64-row,
    32-key tiles: its fp32 accumulator of 128 rows would not stay in registers."""
    heads, dim = q.shape[1], q.shape[2]
    kv_heads = kv_cache.shape[2]
    group = heads // kv_heads
    group_pad = triton.next_power_of_2(group)
    wide = dim > 128
    block_m = max(1, (ROWS_PER_TILE // 2 if wide else ROWS_PER_TILE) // group_pad)
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
        q if sinks is None else sinks,
        scale * LOG2E,
        window,
        softcap * LOG2E,
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
        BLOCK_N=block_n or (32 if wide else 64),
        IEEE=q.dtype == torch.float32,
        KV_FP8=kv_cache.dtype == torch.float8_e4m3fn,
        WINDOWED=window > 0,
        SINKS=sinks is not None,
        SOFTCAP=softcap > 0,
        num_warps=num_warps or (8 if dim >= 128 else 4),
        num_stages=num_stages,
    )
    return out
