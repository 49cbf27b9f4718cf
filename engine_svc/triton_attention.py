"""Attention straight from the paged KV cache in one Triton kernel per layer (CUDA).

The SDPA backend gathers every decode's blocks into a dense copy, builds masks and runs SDPA per group of
prefill chunks: several kernels per layer and copies of the contexts. Here one program per (query row,
KV head) walks its sequence's block table up to the row's own position, loads K/V rows in place and keeps
an online softmax for the query heads that share that KV head (GQA). A row is a decode token or a prefill
token (whose chunk's K/V were written to the cache just before), so a whole step's attention, causal
masking included, is a single kernel with no intermediate copies.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine_svc.attention import AttentionBackend, AttentionMetadata

TOKENS_PER_TILE = 64


@triton.jit
def _paged_attention(q_ptr, cache_ptr, tables_ptr, lens_ptr, index_ptr, out_ptr, scale,
                     stride_q_seq, stride_q_head, stride_slot, stride_kv, stride_cache_head, stride_table,
                     GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                     BLOCK_SIZE: tl.constexpr, TILE: tl.constexpr, INDEXED: tl.constexpr):
    seq = tl.program_id(0)  # the query row
    kv_head = tl.program_id(1)
    table = tl.load(index_ptr + seq) if INDEXED else seq
    group = tl.arange(0, GROUP_PAD)
    dims = tl.arange(0, HEAD_DIM)
    heads = kv_head * GROUP + group
    real = (group < GROUP)[:, None]
    q_offsets = seq * stride_q_seq + heads[:, None] * stride_q_head + dims[None, :]
    q = tl.load(q_ptr + q_offsets, mask=real, other=0.0)
    length = tl.load(lens_ptr + seq)
    best = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    total = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    for start in range(0, length, TILE):
        tokens = start + tl.arange(0, TILE)
        valid = tokens < length
        blocks = tl.load(tables_ptr + table * stride_table + tokens // BLOCK_SIZE, mask=valid, other=0)
        rows = cache_ptr + (blocks * BLOCK_SIZE + tokens % BLOCK_SIZE)[:, None] * stride_slot \
            + kv_head * stride_cache_head + dims[None, :]
        k = tl.load(rows, mask=valid[:, None], other=0.0)
        v = tl.load(rows + stride_kv, mask=valid[:, None], other=0.0)
        scores = tl.dot(q, tl.trans(k)) * scale
        scores = tl.where(valid[None, :], scores, float("-inf"))
        new_best = tl.maximum(best, tl.max(scores, 1))
        weights = tl.exp(scores - new_best[:, None])
        rescale = tl.exp(best - new_best)
        total = total * rescale + tl.sum(weights, 1)
        acc = acc * rescale[:, None] + tl.dot(weights.to(v.dtype), v)
        best = new_best
    out = acc / total[:, None]
    tl.store(out_ptr + q_offsets, out.to(out_ptr.dtype.element_ty), mask=real)


def paged_attention(q: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor, lengths: torch.Tensor,
                    block_size: int, scale: float, table_index: torch.Tensor | None = None) -> torch.Tensor:
    """Row i of q [rows, heads, dim] attends to the first lengths[i] tokens of the sequence whose blocks are
    block_tables[table_index[i]] (table_index None: row i's own table) in kv_cache [slots, 2, kv_heads, dim]."""
    rows, heads, dim = q.shape
    kv_heads = kv_cache.shape[2]
    group = heads // kv_heads
    q = q.contiguous()
    out = torch.empty_like(q)
    _paged_attention[(rows, kv_heads)](
        q, kv_cache, block_tables, lengths, lengths if table_index is None else table_index, out, scale,
        q.stride(0), q.stride(1), kv_cache.stride(0), kv_cache.stride(1), kv_cache.stride(2), block_tables.stride(0),
        GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)), HEAD_DIM=dim, BLOCK_SIZE=block_size,
        TILE=TOKENS_PER_TILE, INDEXED=table_index is not None)
    return out


class TritonBackend(AttentionBackend):
    """Every row of a step, decode or prefill, through the paged kernel."""

    wants_row_tables = True

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int):
        self.scale = head_dim**-0.5

    def forward(self, q, kv, kv_cache, meta: AttentionMetadata) -> torch.Tensor:
        if meta.row_tables is None:  # a decode-only step: row i is sequence i
            return paged_attention(q, kv_cache, meta.decode_block_tables, meta.decode_context_lens, meta.block_size,
                                   self.scale)
        return paged_attention(q, kv_cache, meta.row_tables, meta.row_lengths, meta.block_size, self.scale,
                               meta.row_table_index)
