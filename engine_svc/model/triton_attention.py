"""Attention straight from the paged KV cache in Triton kernels (CUDA).

The SDPA backend gathers every decode's blocks into a dense copy, builds masks and runs SDPA per group of
prefill chunks: several kernels per layer and copies of the contexts. Here one program per (decode row,
KV head) walks its sequence's block table, loads K/V rows in place and keeps an online softmax for the
query heads that share that KV head (GQA). A step's prefill chunks (their K/V written to the cache just
before) take the FlashAttention-style kernel of `triton_prefill`, all of them in one launch.

A decode step of a few rows has too few (row, KV head) programs to keep the GPU busy: its rows split their
context over several programs (flash-decoding) and a second kernel combines the partial softmaxes. The
rotation of q and k and the K/V write into the cache are one more kernel per layer (`rope_store`), and a
decode loop's step-to-step advance of positions, lengths and slots is one kernel (`advance`).

Sliding-window layers, soft-capped scores and attention sinks are per-layer variants of both kernels (see
`triton_prefill`): a windowed decode row walks (and splits) only the last `window` tokens of its context, and
the sink joins the softmax of the row's first split only, so the combine counts it once.
"""
# pyright: reportArgumentType=false, reportCallIssue=false, reportOperatorIssue=false, reportIndexIssue=false
# (Triton's stubs type kernel parameters as tl.constexpr and tensors' indexing narrowly; kernels pass plain values.)

from __future__ import annotations

import torch
import triton  # pyright: ignore[reportMissingImports]
import triton.language as tl  # pyright: ignore[reportMissingImports]

from engine_svc.model.attention import AttentionBackend, AttentionMetadata, QkNorm
from engine_svc.model.triton_pdl import pdl, wait_for_inputs
from engine_svc.model.triton_prefill import prefill_attention, soft_cap

TOKENS_PER_TILE = 64
SMS_TO_FILL = 132  # an H100 / H200: a few decode rows split their context until the programs cover it
MAX_SPLITS = 16


@triton.jit
def _widen_e4m3(x, ASM: tl.constexpr):
    """float8 e4m3 -> float16, two per instruction (cvt.rn.f16x2.e4m3x2). Triton moves a plain `.to(float16)`
    of a dot operand past the operand's layout change, so the 8-bit values are read from shared memory one byte
    at a time (128 ld.shared.b8 a tile: V's tokens, the dot's reduction axis, are 256 B apart); inline asm with
    side effects stays where it is, and the widened values reach the dot as 16-bit (ldmatrix.trans). ASM False:
    Triton's CPU interpreter, which runs no PTX."""
    if ASM:
        return tl.inline_asm_elementwise(
            "{ .reg .b16 lo, hi; mov.b32 {lo, hi}, $2; cvt.rn.f16x2.e4m3x2 $0, lo; cvt.rn.f16x2.e4m3x2 $1, hi; }",
            "=r,=r,r",
            [x.to(tl.uint8, bitcast=True)],
            dtype=tl.float16,
            is_pure=False,
            pack=4,
        )
    return x.to(tl.float16)


# A decode batch's block-table width (stride_table) varies from step to step: compiling per width class at
# serving time stalls a step for a second, so it is not a specialization.
@triton.jit(do_not_specialize=["stride_table"])
def _paged_attention(
    q_ptr,
    cache_ptr,
    tables_ptr,
    lens_ptr,
    index_ptr,
    out_ptr,
    part_ptr,
    stats_ptr,
    sinks_ptr,
    scale,
    window,
    softcap,
    stride_q_seq,
    stride_q_head,
    stride_slot,
    stride_kv,
    stride_cache_head,
    stride_table,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    TILE: tl.constexpr,
    INDEXED: tl.constexpr,
    SPLITS: tl.constexpr,
    HEADS_FIRST: tl.constexpr,
    KV_FP8: tl.constexpr,
    WIDEN_ASM: tl.constexpr,
    WINDOWED: tl.constexpr,
    SINKS: tl.constexpr,
    SOFTCAP: tl.constexpr,
    PDL: tl.constexpr,
):
    wait_for_inputs(PDL)
    if HEADS_FIRST:  # a row's KV heads run side by side: together they read each token's whole cache row
        kv_head, seq, kv_heads = tl.program_id(0), tl.program_id(1), tl.num_programs(0)
    else:
        seq, kv_head, kv_heads = tl.program_id(0), tl.program_id(1), tl.num_programs(1)
    split = tl.program_id(2)
    table = tl.load(index_ptr + seq) if INDEXED else seq
    group = tl.arange(0, GROUP_PAD)
    dims = tl.arange(0, HEAD_DIM)
    heads = kv_head * GROUP + group
    real = (group < GROUP)[:, None]
    q_offsets = seq * stride_q_seq + heads[:, None] * stride_q_head + dims[None, :]
    q = tl.load(q_ptr + q_offsets, mask=real, other=0.0)
    if KV_FP8:  # e4m3 widens to float16 in one instruction (cvt.rn.f16x2.e4m3x2): q goes to float16 too
        q = q.to(tl.float16)
    length = tl.load(lens_ptr + seq)
    first = length * 0  # the first key the row sees (an integer of length's type)
    if WINDOWED:  # the last `window` positions, the new token's included: earlier tiles are never read
        first = tl.maximum(length - window, 0)
    # Whole tiles from the one holding `first` (the keys before it masked): tiles at any offset spill registers.
    start = first // TILE * TILE
    per_split = tl.cdiv(tl.cdiv(length - start, TILE), SPLITS) * TILE
    lo = start + split * per_split
    hi = tl.minimum(lo + per_split, length)
    best = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    total = tl.zeros([GROUP_PAD], tl.float32)
    if SINKS:  # in the first split: the sink logit with weight exp(0) = 1 and no value
        sink = tl.load(sinks_ptr + heads, mask=group < GROUP, other=0.0).to(tl.float32)
        best = tl.where(split == 0, sink, best)
        total = tl.where(split == 0, 1.0, total)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    for base in range(lo, hi, TILE):
        tokens = base + tl.arange(0, TILE)
        valid = tokens < hi
        blocks = tl.load(tables_ptr + table * stride_table + tokens // BLOCK_SIZE, mask=valid, other=0)
        rows = (
            cache_ptr
            + (blocks * BLOCK_SIZE + tokens % BLOCK_SIZE)[:, None] * stride_slot
            + kv_head * stride_cache_head
            + dims[None, :]
        )
        k = tl.load(rows, mask=valid[:, None], other=0.0)
        v = tl.load(rows + stride_kv, mask=valid[:, None], other=0.0)
        if KV_FP8:
            k, v = k.to(tl.float16), _widen_e4m3(v, WIDEN_ASM)
        scores = tl.dot(q, tl.trans(k)) * scale
        if SOFTCAP:
            scores = soft_cap(scores, softcap)
        seen = valid
        if WINDOWED:  # a mask on the scores only: one on the loads too spills registers (sm_90, head_dim 128)
            seen = seen & (tokens >= first)
        scores = tl.where(seen[None, :], scores, float("-inf"))
        new_best = tl.maximum(best, tl.max(scores, 1))
        weights = tl.exp(scores - new_best[:, None])
        rescale = tl.exp(best - new_best)
        total = total * rescale + tl.sum(weights, 1)
        acc = acc * rescale[:, None] + tl.dot(weights.to(v.dtype), v)
        best = new_best
    if SPLITS == 1:
        out = acc / total[:, None]
        tl.store(out_ptr + q_offsets, out.to(out_ptr.dtype.element_ty), mask=real)
    else:  # this split's unnormalised output, running max and sum, for _combine_splits
        part = (seq * kv_heads + kv_head) * SPLITS + split
        tl.store(part_ptr + (part * GROUP_PAD + group[:, None]) * HEAD_DIM + dims[None, :], acc)
        tl.store(stats_ptr + (part * 2) * GROUP_PAD + group, best)
        tl.store(stats_ptr + (part * 2 + 1) * GROUP_PAD + group, total)


@triton.jit
def _combine_splits(
    part_ptr,
    stats_ptr,
    out_ptr,
    stride_q_seq,
    stride_q_head,
    kv_heads,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    SPLITS: tl.constexpr,
    PDL: tl.constexpr,
):
    """One query head of one row a program: at batch 1 a program per KV head (loading every head of its group)
    took ~8 us a layer, the latency of one SM's loads."""
    wait_for_inputs(PDL)
    seq = tl.program_id(0)
    head = tl.program_id(1)
    member = head % GROUP
    splits = tl.arange(0, SPLITS)
    dims = tl.arange(0, HEAD_DIM)
    parts = (seq * kv_heads + head // GROUP) * SPLITS + splits  # [SPLITS]
    best = tl.load(stats_ptr + (parts * 2) * GROUP_PAD + member)
    total = tl.load(stats_ptr + (parts * 2 + 1) * GROUP_PAD + member)
    weights = tl.exp(best - tl.max(best, 0))  # an empty split (max -inf) weighs 0
    acc = tl.load(part_ptr + (parts[:, None] * GROUP_PAD + member) * HEAD_DIM + dims[None, :])
    out = tl.sum(acc * weights[:, None], 0) / tl.sum(total * weights, 0)
    tl.store(out_ptr + seq * stride_q_seq + head * stride_q_head + dims, out.to(out_ptr.dtype.element_ty))


@triton.jit
def _rope_store(
    qkv_ptr,
    cos_ptr,
    sin_ptr,
    slots_ptr,
    cache_ptr,
    q_ptr,
    stride_qkv,
    stride_rope,
    stride_slot,
    stride_kv,
    stride_q_seq,
    q_norm_ptr,
    k_norm_ptr,
    eps,
    NUM_HEADS: tl.constexpr,
    NUM_KV_HEADS: tl.constexpr,
    HEADS_PAD: tl.constexpr,
    HALF: tl.constexpr,
    QK_NORM: tl.constexpr,
    PDL: tl.constexpr,
):
    wait_for_inputs(PDL)
    token = tl.program_id(0)
    heads = tl.arange(0, HEADS_PAD)  # q heads, then k heads, then v heads of the fused qkv row
    dims = tl.arange(0, HALF)
    present = (heads < NUM_HEADS + 2 * NUM_KV_HEADS)[:, None]
    is_q = (heads < NUM_HEADS)[:, None]
    rotate = (heads < NUM_HEADS + NUM_KV_HEADS)[:, None]  # q and k turn, v does not
    row = qkv_ptr + token * stride_qkv + heads[:, None] * (2 * HALF) + dims[None, :]
    x1 = tl.load(row, mask=present, other=0.0).to(tl.float32)
    x2 = tl.load(row + HALF, mask=present, other=0.0).to(tl.float32)
    if QK_NORM:  # Qwen3's, Gemma 3's: each q and k head RMS-normed over its dims before the rotation
        inverse_rms = tl.rsqrt((tl.sum(x1 * x1, 1) + tl.sum(x2 * x2, 1)) / (2 * HALF) + eps)[:, None]
        w1 = tl.where(is_q, tl.load(q_norm_ptr + dims)[None, :], tl.load(k_norm_ptr + dims)[None, :])
        w2 = tl.where(is_q, tl.load(q_norm_ptr + HALF + dims)[None, :], tl.load(k_norm_ptr + HALF + dims)[None, :])
        # rounded to qkv's dtype as the unfused norm's output, before the rotation
        x1 = tl.where(rotate, (x1 * inverse_rms * w1.to(tl.float32)).to(qkv_ptr.dtype.element_ty).to(tl.float32), x1)
        x2 = tl.where(rotate, (x2 * inverse_rms * w2.to(tl.float32)).to(qkv_ptr.dtype.element_ty).to(tl.float32), x2)
    cos1 = tl.load(cos_ptr + token * stride_rope + dims).to(tl.float32)[None, :]
    cos2 = tl.load(cos_ptr + token * stride_rope + HALF + dims).to(tl.float32)[None, :]
    sin1 = tl.load(sin_ptr + token * stride_rope + dims).to(tl.float32)[None, :]
    sin2 = tl.load(sin_ptr + token * stride_rope + HALF + dims).to(tl.float32)[None, :]
    y1 = tl.where(rotate, x1 * cos1 - x2 * sin1, x1)
    y2 = tl.where(rotate, x2 * cos2 + x1 * sin2, x2)
    q_row = q_ptr + token * stride_q_seq + heads[:, None] * (2 * HALF) + dims[None, :]
    tl.store(q_row, y1.to(q_ptr.dtype.element_ty), mask=is_q)
    tl.store(q_row + HALF, y2.to(q_ptr.dtype.element_ty), mask=is_q)
    slot = tl.load(slots_ptr + token)
    kv = tl.where(heads < NUM_HEADS + NUM_KV_HEADS, 0, 1)[:, None]  # cache [slot, K or V, kv head, dim]
    kv_head = tl.where(kv == 0, heads[:, None] - NUM_HEADS, heads[:, None] - NUM_HEADS - NUM_KV_HEADS)
    in_cache = present & (heads >= NUM_HEADS)[:, None]
    kv_head = tl.where(in_cache, kv_head, 0)
    cache_row = cache_ptr + slot * stride_slot + kv * stride_kv + kv_head * (2 * HALF) + dims[None, :]
    tl.store(cache_row, y1.to(cache_ptr.dtype.element_ty), mask=in_cache)  # an fp8 cache: rounded once, from fp32
    tl.store(cache_row + HALF, y2.to(cache_ptr.dtype.element_ty), mask=in_cache)


@triton.jit(do_not_specialize=["rows", "stride_table", "width"])
def _advance(
    positions_ptr,
    lens_ptr,
    tables_ptr,
    slots_ptr,
    rows,
    stride_table,
    width,
    BLOCK_SIZE: tl.constexpr,
    ROWS_PAD: tl.constexpr,
    PDL: tl.constexpr,
):
    wait_for_inputs(PDL)
    row = tl.arange(0, ROWS_PAD)
    real = row < rows
    position = tl.load(positions_ptr + row, mask=real) + 1
    tl.store(positions_ptr + row, position, mask=real)
    tl.store(lens_ptr + row, tl.load(lens_ptr + row, mask=real) + 1, mask=real)
    column = tl.minimum(position // BLOCK_SIZE, width - 1)  # padded rows stay in range
    block = tl.load(tables_ptr + row * stride_table + column, mask=real, other=0)
    tl.store(slots_ptr + row, block * BLOCK_SIZE + position % BLOCK_SIZE, mask=real)


def rope_store(
    qkv: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    slots: torch.Tensor,
    kv_cache: torch.Tensor,
    num_heads: int,
    qk_norm: QkNorm | None = None,
) -> torch.Tensor:
    """Rotates q and k of qkv [tokens, (heads + 2 kv_heads) * dim] by cos/sin [tokens, dim] (half-rotation),
    writes k and v to kv_cache [slots, 2, kv_heads, dim] at `slots`, and returns q [tokens, heads, dim].
    `qk_norm`: each q and k head RMS-normed first, in the same kernel (fused_ops.qk_norm's three launches)."""
    tokens = qkv.shape[0]
    kv_heads, dim = kv_cache.shape[2], kv_cache.shape[3]
    q = qkv.new_empty(tokens, num_heads, dim)
    cos, sin = cos.reshape(tokens, dim), sin.reshape(tokens, dim)
    _rope_store[(tokens,)](  # pyright: ignore[reportIndexIssue]
        qkv,
        cos,
        sin,
        slots,
        kv_cache,
        q,
        qkv.stride(0),
        cos.stride(0),
        kv_cache.stride(0),
        kv_cache.stride(1),
        q.stride(0),
        qkv if qk_norm is None else qk_norm.q_weight,
        qkv if qk_norm is None else qk_norm.k_weight,
        0.0 if qk_norm is None else qk_norm.eps,
        NUM_HEADS=num_heads,
        NUM_KV_HEADS=kv_heads,
        HEADS_PAD=triton.next_power_of_2(num_heads + 2 * kv_heads),
        HALF=dim // 2,
        QK_NORM=qk_norm is not None,
        **pdl(),
    )
    return q


def pick_splits(rows: int, kv_heads: int, max_len: int) -> int:
    """Context splits per row: enough programs to cover the GPU, a tile of context each at least. Inside the
    decode graph of a 1B Llama on the H200, 4 splits take 3.5 + 2.8 us (combine) against 7.4 us for one
    program at 192 tokens, and 16 splits 8.6 against 20.4 us at 1,024."""
    wanted = triton.next_power_of_2(max(1, -(-SMS_TO_FILL // (rows * kv_heads))))
    return max(1, min(wanted, MAX_SPLITS, triton.next_power_of_2(-(-max_len // TOKENS_PER_TILE))))


def paged_attention(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_tables: torch.Tensor,
    lengths: torch.Tensor,
    block_size: int,
    scale: float,
    table_index: torch.Tensor | None = None,
    splits: int = 1,
    out: torch.Tensor | None = None,
    window: int = 0,
    sinks: torch.Tensor | None = None,
    softcap: float = 0.0,
    tile: int | None = None,
    heads_first: bool = True,
    num_warps: int = 2,
    num_stages: int = 2,
) -> torch.Tensor:
    """Row i of q [rows, heads, dim] attends to the first lengths[i] tokens of the sequence whose blocks are
    block_tables[table_index[i]] (table_index None: row i's own table) in kv_cache [slots, 2, kv_heads, dim]
    (the model's dtype, or float8 e4m3: K/V widened to float16 after each load, q with them).
    `splits` > 1 (a power of two) splits each row's context over that many programs. `out`: where to write
    (contiguous, like q; default a new tensor). `window` (0: none), `sinks` [heads] and `softcap` (0: none): the
    layer's variants, as in `prefill_attention`. `tile` (context tokens per loop step), `heads_first` (the grid's
    first axis runs over KV heads, so a row's heads run side by side), `num_warps` and `num_stages` are for
    tuning: the defaults won the sweep of `python -m bench.engine.kernels --parts attention` on the H200 at 64 and
    256 rows of 192 tokens (Llama-8B shape: 57.3 -> 54.1 us at 256 rows, 13.8 -> 12.5 at 64, against Triton's
    default 4 warps, 3 stages, rows first). A 256-wide head (Gemma) takes 32-token tiles: at 64 its K/V tiles
    spill (sm_90: 6 KB of stack a thread against 128 B)."""
    rows, heads, dim = q.shape
    kv_heads = kv_cache.shape[2]
    group = heads // kv_heads
    group_pad = max(16, triton.next_power_of_2(group))
    q = q.contiguous()
    out = torch.empty_like(q) if out is None else out
    part = stats = out
    if splits > 1:
        part = torch.empty(rows * kv_heads * splits * group_pad * dim, dtype=torch.float32, device=q.device)
        stats = torch.empty(rows * kv_heads * splits * 2 * group_pad, dtype=torch.float32, device=q.device)
    grid = (kv_heads, rows, splits) if heads_first else (rows, kv_heads, splits)
    _paged_attention[grid](  # pyright: ignore[reportIndexIssue]
        q,
        kv_cache,
        block_tables,
        lengths,
        lengths if table_index is None else table_index,
        out,
        part,
        stats,
        q if sinks is None else sinks,
        scale,
        window,
        softcap,
        q.stride(0),
        q.stride(1),
        kv_cache.stride(0),
        kv_cache.stride(1),
        kv_cache.stride(2),
        block_tables.stride(0),
        GROUP=group,
        GROUP_PAD=group_pad,
        HEAD_DIM=dim,
        BLOCK_SIZE=block_size,
        TILE=tile or (TOKENS_PER_TILE // 2 if dim > 128 else TOKENS_PER_TILE),
        INDEXED=table_index is not None,
        SPLITS=splits,
        HEADS_FIRST=heads_first,
        KV_FP8=kv_cache.dtype == torch.float8_e4m3fn,
        WIDEN_ASM=not triton.knobs.runtime.interpret,  # pyright: ignore[reportAttributeAccessIssue]
        WINDOWED=window > 0,
        SINKS=sinks is not None,
        SOFTCAP=softcap > 0,
        num_warps=num_warps,
        num_stages=num_stages,
        **pdl(),
    )
    if splits > 1:
        _combine_splits[(rows, kv_heads * group)](  # pyright: ignore[reportIndexIssue]
            part, stats, out, q.stride(0), q.stride(1), kv_heads, GROUP=group, GROUP_PAD=group_pad, HEAD_DIM=dim,
            SPLITS=splits, **pdl(),
        )  # fmt: skip
    return out


class TritonBackend(AttentionBackend):
    """Decode rows through the paged kernel, a step's prefill chunks through the prefill kernel (one launch);
    K/V written by rope_store."""

    wants_prefill_table = True

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int, scale: float = 0.0, softcap: float = 0.0):
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.scale = scale or head_dim**-0.5
        self.softcap = softcap

    def advance(self, positions: torch.Tensor, meta: AttentionMetadata) -> None:
        tables = meta.decode_block_tables
        rows = positions.shape[0]
        _advance[(1,)](  # pyright: ignore[reportIndexIssue]
            positions,
            meta.decode_context_lens,
            tables,
            meta.slot_mapping,
            rows,
            tables.stride(0),
            tables.shape[1],
            BLOCK_SIZE=meta.block_size,
            ROWS_PAD=triton.next_power_of_2(rows),
            **pdl(),
        )

    def decode_width_free(self, rows: int, max_len: int) -> bool:
        """Each row walks its own blocks up to its length; only the context splits follow the width (a windowed
        layer's splits follow min(width, window): one split here, one there)."""
        return pick_splits(rows, self.num_kv_heads, max_len) == 1

    def store(self, qkv, cos, sin, kv_cache, meta: AttentionMetadata, ops, qk_norm: QkNorm | None = None):
        return rope_store(qkv, cos, sin, meta.slot_mapping, kv_cache, self.num_heads, qk_norm), None

    def forward(self, q, kv, kv_cache, meta: AttentionMetadata, out=None, window: int = 0, sinks=None):
        decodes, chunks, blocks = meta.num_decodes, meta.prefill_table, meta.prefill_blocks
        if not meta.prefills or chunks is None or blocks is None:  # decode only (a graph's step): row i, sequence i
            return self._decode(q, kv_cache, meta, out, window, sinks)
        out = torch.empty_like(q) if out is None else out
        if decodes:
            self._decode(q[:decodes], kv_cache, meta, out[:decodes], window, sinks)
        longest = max(c.num_tokens for c in meta.prefills)
        return prefill_attention(
            q, kv_cache, blocks, chunks, longest, meta.block_size, self.scale, out, window, sinks, self.softcap
        )

    def _decode(self, q, kv_cache, meta: AttentionMetadata, out=None, window: int = 0, sinks=None) -> torch.Tensor:
        tables = meta.decode_block_tables
        span = tables.shape[1] * meta.block_size
        splits = pick_splits(q.shape[0], self.num_kv_heads, min(span, window) if window else span)
        lengths = meta.decode_context_lens
        return paged_attention(
            q, kv_cache, tables, lengths, meta.block_size, self.scale, None, splits, out, window, sinks, self.softcap
        )
