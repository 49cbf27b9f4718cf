"""Decode attention straight from the paged KV cache in one Triton kernel per layer (CUDA).

The SDPA backend gathers every decode's blocks into a dense copy, builds a mask and runs SDPA: three to
five kernels per layer and a copy of the whole context. Here one program per (sequence, KV head) walks the
sequence's block table, loads K/V rows in place and keeps an online softmax for the query heads that share
that KV head (GQA), so a decode layer's attention is a single kernel with no intermediate copies. Prefill
chunks still go through SDPA.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine_svc.attention import AttentionMetadata, SdpaBackend

TOKENS_PER_TILE = 64


@triton.jit
def _paged_decode(q_ptr, cache_ptr, tables_ptr, lens_ptr, out_ptr, scale,
                  stride_q_seq, stride_q_head, stride_slot, stride_kv, stride_cache_head, stride_table,
                  GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                  BLOCK_SIZE: tl.constexpr, TILE: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
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
        blocks = tl.load(tables_ptr + seq * stride_table + tokens // BLOCK_SIZE, mask=valid, other=0)
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


def paged_decode_attention(q: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                           context_lens: torch.Tensor, block_size: int, scale: float) -> torch.Tensor:
    """q [decodes, heads, dim] attends to the first context_lens[i] tokens of sequence i's blocks in
    kv_cache [slots, 2, kv_heads, dim]; returns [decodes, heads, dim]."""
    decodes, heads, dim = q.shape
    kv_heads = kv_cache.shape[2]
    group = heads // kv_heads
    q = q.contiguous()
    out = torch.empty_like(q)
    _paged_decode[(decodes, kv_heads)](
        q, kv_cache, block_tables, context_lens, out, scale,
        q.stride(0), q.stride(1), kv_cache.stride(0), kv_cache.stride(1), kv_cache.stride(2), block_tables.stride(0),
        GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)), HEAD_DIM=dim, BLOCK_SIZE=block_size,
        TILE=TOKENS_PER_TILE)
    return out


class TritonBackend(SdpaBackend):
    """SDPA for prefill chunks, the paged Triton kernel for decodes."""

    def _decode(self, q, kv_cache, meta: AttentionMetadata):
        return paged_decode_attention(q, kv_cache, meta.decode_block_tables, meta.decode_context_lens,
                                      meta.block_size, self.scale)
