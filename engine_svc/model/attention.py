"""Attention over the paged KV cache, behind a small backend interface.

The cache of one layer is one tensor [num_blocks * block_size, 2 (K, V), kv_heads, head_dim]; a sequence owns
a list of blocks (its block table). A flat batch holds the decode tokens first (one per sequence) and then
the prefill chunks. `SdpaBackend` uses torch's scaled_dot_product_attention: decodes gather their blocks in
one batched index and attend with a length mask (CUDA-graph friendly: fixed shapes per bucket); each prefill SDPA
call covers either adjacent chunks that start their sequences (a block-diagonal causal mask over their rows)
or one chunk that continues a sequence (its context gathered from the cache). A sliding-window layer
(`window`) sees only keys within the last `window` positions of its query: its masks narrow the causal ones.
Where those layers have a pool of their own (`AttentionMetadata.windowed`), the blocks that left every query's
window are 0 in their tables (the scratch block, finite values): gathered, and masked out as before. Soft-capped scores (Gemma 2) and sinks (gpt-oss) take the
math path. This backend is the reference of those semantics (transformers'); the Triton kernels
(triton_attention.py) do the same. Faster kernels plug in as other backends; `pick_attention` and `make_backend`
choose one from the flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass
class PrefillChunk:
    token_start: int  # first row of the chunk in the flat batch
    num_tokens: int
    context_start: int  # tokens of this sequence already in the cache before the chunk
    block_ids: torch.Tensor  # the blocks covering context_start + num_tokens tokens


@dataclass
class PrefillCall:
    """One SDPA call of a layer: query rows of the flat batch, the keys they see and the mask (None: causal)."""

    rows: slice
    block_ids: torch.Tensor | None  # keys: these blocks from the cache (a continuing chunk); None: kv[rows]
    mask: torch.Tensor | None
    query_offset: int = 0  # query row i sits at key column i + query_offset (its context start)
    windowed: dict[int, torch.Tensor] = field(default_factory=dict)  # the mask narrowed to a window, by window

    def window_mask(self, window: int, device) -> torch.Tensor | None:
        """The mask of a layer whose queries see keys within the last `window` positions (0: every key)."""
        if not window:
            return self.mask
        if window not in self.windowed:
            rows = self.rows.stop - self.rows.start
            keys = self.mask.shape[1] if self.mask is not None else rows
            queries = torch.arange(rows, device=device)[:, None] + self.query_offset
            columns = torch.arange(keys, device=device)[None, :]
            causal = self.mask if self.mask is not None else columns <= queries
            self.windowed[window] = causal & (columns > queries - window)
        return self.windowed[window]


def _no_rows(*shape: int) -> torch.Tensor:
    return torch.zeros(shape, dtype=torch.int64)


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [tokens] cache row each token's K/V is written to
    block_size: int
    num_decodes: int = 0
    decode_block_tables: torch.Tensor = field(default_factory=lambda: _no_rows(0, 0))  # [decodes, blocks]
    decode_context_lens: torch.Tensor = field(default_factory=lambda: _no_rows(0))  # [decodes], new token included
    prefills: list[PrefillChunk] = field(default_factory=list)
    # Per-chunk view of a mixed or prefill step, for backends with `wants_prefill_table`: row i of prefill_table
    # [chunks, 4] is chunk i's first row, token count, context start and the index in prefill_blocks of its
    # sequence's first block (the others follow there in order).
    prefill_table: torch.Tensor | None = None
    prefill_blocks: torch.Tensor | None = None
    # Filled by the backend's prepare(), once per forward.
    decode_mask: torch.Tensor | None = None
    decode_window_masks: dict[int, torch.Tensor] = field(default_factory=dict)
    prefill_calls: list[PrefillCall] = field(default_factory=list)
    # The sliding-window layers' view where they have a pool of their own (kv_groups.py): the same rows, lengths
    # and prefill table, their own slots and block tables. None: every layer reads the fields above.
    windowed: AttentionMetadata | None = None

    def for_window(self, window: int) -> AttentionMetadata:
        """The view a layer of this `window` (0: full attention) reads."""
        return self.windowed if window and self.windowed is not None else self


@dataclass(frozen=True)
class QkNorm:
    """The RMSNorm of each q and each k head before RoPE (Qwen3, Gemma 3): weights [head_dim] and epsilon."""

    q_weight: torch.Tensor
    k_weight: torch.Tensor
    eps: float


class AttentionBackend:
    """Attention for a flat batch: q [tokens, heads, dim], kv [tokens, 2, kv_heads, dim] (this step's K/V,
    already written to kv_cache)."""

    wants_prefill_table = False
    num_heads: int
    num_kv_heads: int

    def prepare(self, meta: AttentionMetadata) -> None:
        """Per-forward work shared by every layer (masks)."""

    def advance(self, positions: torch.Tensor, meta: AttentionMetadata) -> None:
        """Moves a decode batch one token on: positions and context lengths up by one, slots to match."""
        positions.add_(1)
        meta.decode_context_lens.add_(1)
        self.advance_slots(positions, meta)

    @staticmethod
    def advance_slots(positions: torch.Tensor, meta: AttentionMetadata) -> None:
        """The slots of the (advanced) positions in meta's block tables."""
        tables = meta.decode_block_tables
        columns = (positions // meta.block_size).clamp_(max=tables.shape[1] - 1)  # padded rows stay in range
        blocks = tables.gather(1, columns[:, None])[:, 0]
        torch.add(positions % meta.block_size, blocks, alpha=meta.block_size, out=meta.slot_mapping)

    def decode_width_free(self, rows: int, max_len: int) -> bool:
        """Whether a decode step of `rows` rows does the same work whatever its block tables' width (up to
        `max_len` tokens): then one CUDA graph serves every width. Not here: the decode gathers whole tables."""
        return False

    def store(self, qkv, cos, sin, kv_cache, meta: AttentionMetadata, ops, qk_norm: QkNorm | None = None):
        """Rotates this step's q and k (each head RMS-normed first where `qk_norm`), writes K/V to kv_cache at the
        slot mapping; returns (q, kv)."""
        if qk_norm is not None:
            qkv = ops.qk_norm(qkv, qk_norm.q_weight, qk_norm.k_weight, qk_norm.eps, self.num_heads)
        q, kv = ops.rope_split(qkv, cos, sin, self.num_heads, self.num_kv_heads)
        if kv_cache.dtype == kv.dtype:
            kv_cache.index_copy_(0, meta.slot_mapping, kv)
        else:  # an fp8 cache: narrowed, written as bytes (index_copy_ has no float8 kernel on CPU)
            kv_cache.view(torch.uint8).index_copy_(0, meta.slot_mapping, kv.to(kv_cache.dtype).view(torch.uint8))
        return q, kv

    def forward(self, q, kv, kv_cache, meta: AttentionMetadata, out=None, window: int = 0, sinks=None):
        """The attention output [tokens, heads, dim], written to `out` when given (and returned). `window`: the
        layer's sliding window (0: none); `sinks`: [heads] logits that join each softmax and are dropped after
        (gpt-oss)."""
        raise NotImplementedError


class SdpaBackend(AttentionBackend):
    # Adjacent fresh chunks share one prefill call up to this many rows in all; None: 2048 on CUDA, where a
    # call's launches cost more than a short chunk's attention, and 1 on CPU, where the masked-out part of
    # the shared call (which grows with the square of its rows) costs more than the calls.
    rows_per_call: int | None = None

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int, scale: float = 0.0, softcap: float = 0.0):
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.group = num_heads // num_kv_heads
        self.scale = scale or head_dim**-0.5
        self.softcap = softcap

    def prepare(self, meta: AttentionMetadata) -> None:
        device = meta.slot_mapping.device
        meta.decode_window_masks = {}  # of the previous step, in a decode loop that reuses `meta`
        if meta.num_decodes:
            span = meta.decode_block_tables.shape[1] * meta.block_size
            keys = torch.arange(span, device=device)
            meta.decode_mask = (keys[None, :] < meta.decode_context_lens[:, None])[:, None, None, :]
        cap = self.rows_per_call or (2048 if device.type == "cuda" else 1)
        meta.prefill_calls, group = [], []
        for chunk in meta.prefills:
            if chunk.context_start:
                meta.prefill_calls.append(self._continuing_call(chunk, device))
            elif group and _end(group[-1]) == chunk.token_start and _end(chunk) - group[0].token_start <= cap:
                group.append(chunk)
            else:
                if group:
                    meta.prefill_calls.append(self._fresh_call(group, device))
                group = [chunk]
        if group:
            meta.prefill_calls.append(self._fresh_call(group, device))

    @staticmethod
    def _fresh_call(group: list[PrefillChunk], device) -> PrefillCall:
        """Adjacent fresh chunks: row i sees rows first[i]..i of the call, the causal part of its own chunk."""
        rows = slice(group[0].token_start, _end(group[-1]))
        if len(group) == 1:
            return PrefillCall(rows, None, None)
        lengths = torch.tensor([c.num_tokens for c in group])
        first = torch.repeat_interleave(lengths.cumsum(0) - lengths, lengths).to(device)
        index = torch.arange(first.shape[0], device=device)
        return PrefillCall(rows, None, (index[None, :] <= index[:, None]) & (index[None, :] >= first[:, None]))

    @staticmethod
    def _continuing_call(chunk: PrefillChunk, device) -> PrefillCall:
        """A chunk after context_start cached tokens: causal over its sequence's gathered blocks."""
        total = chunk.context_start + chunk.num_tokens
        queries = torch.arange(chunk.context_start, total, device=device)
        keys = torch.arange(total, device=device)
        rows = slice(chunk.token_start, _end(chunk))
        return PrefillCall(rows, chunk.block_ids, keys[None, :] <= queries[:, None], chunk.context_start)

    def forward(self, q, kv, kv_cache, meta: AttentionMetadata, out=None, window: int = 0, sinks=None):
        decodes = meta.num_decodes
        if decodes == q.shape[0]:
            attn = self._decode(q, kv_cache, meta, window, sinks)
            return attn if out is None else out.copy_(attn)
        out = torch.empty_like(q) if out is None else out
        if decodes:
            out[:decodes] = self._decode(q[:decodes], kv_cache, meta, window, sinks)
        for call in meta.prefill_calls:
            if call.block_ids is None:
                context = kv[call.rows]
            else:
                assert call.mask is not None  # a continuing chunk's call always has its mask, one column per key
                context = self._gather(kv_cache, call.block_ids, meta.block_size, q.dtype)[: call.mask.shape[1]]
            # Contiguous K/V with every query head (no enable_gqa) keeps SDPA on its fast kernels (cuDNN /
            # flash / memory-efficient, masked or not); with enable_gqa or strided K/V it falls back to the
            # slow math path on CUDA.
            keys, values = (t.transpose(0, 1).repeat_interleave(self.group, dim=0)[None] for t in context.unbind(-3))
            mask = call.window_mask(window, q.device)
            per_head = None if sinks is None else sinks.view(1, -1, 1, 1)
            attn = self._attend(q[call.rows].transpose(0, 1)[None], keys, values, mask, per_head)
            out[call.rows] = attn[0].transpose(0, 1)
        return out

    def _attend(self, q, k, v, mask: torch.Tensor | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
        """softmax(q k^T * scale, masked; None: causal) v. Soft-capped scores and sinks (a logit per head, shaped
        to broadcast over q's rows, that takes its share of the softmax and no value) go the math way."""
        if not self.softcap and sinks is None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, scale=self.scale)
        scores = torch.matmul(q, k.transpose(-1, -2)).float() * self.scale
        if self.softcap:
            scores = torch.tanh(scores / self.softcap) * self.softcap
        if mask is None:
            mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        if sinks is not None:
            sink = sinks.float().expand(*scores.shape[:-1], 1)
            return torch.matmul(torch.softmax(torch.cat((scores, sink), -1), -1)[..., :-1].to(v.dtype), v)
        return torch.matmul(torch.softmax(scores, dim=-1).to(v.dtype), v)

    def _gather(self, cache, block_ids, block_size, dtype):
        """Rows of the given blocks, in order: [..., blocks * block_size, 2, kv_heads, dim], as `dtype` (an fp8
        cache widens). index_select copies whole blocks; indexing with the table copied element by element (CPU,
        64 decode rows of 128 tokens: 37 against 54 ms a step over the default model's 30 layers)."""
        blocks = cache.view(-1, block_size, 2, self.num_kv_heads, self.head_dim).index_select(0, block_ids.flatten())
        blocks = blocks.view(*block_ids.shape[:-1], -1, 2, self.num_kv_heads, self.head_dim)
        return blocks.to(dtype)

    def _decode(self, q, kv_cache, meta, window: int = 0, sinks=None):
        # The query heads that share a KV head become that head's "query rows": no K/V repetition needed.
        decodes = q.shape[0]
        gathered = self._gather(kv_cache, meta.decode_block_tables, meta.block_size, q.dtype)
        keys, values = gathered.transpose(-4, -2).unbind(-3)
        queries = q.view(decodes, self.num_kv_heads, self.group, self.head_dim)
        mask = meta.decode_mask
        if window and mask is not None:  # the keys of the last `window` positions, the new token's included
            if window not in meta.decode_window_masks:
                starts = (meta.decode_context_lens - window)[:, None, None, None]
                keys_at = torch.arange(mask.shape[-1], device=mask.device)
                meta.decode_window_masks[window] = mask & (keys_at >= starts)
            mask = meta.decode_window_masks[window]
        per_head = None if sinks is None else sinks.view(1, self.num_kv_heads, self.group, 1)
        attn = self._attend(queries, keys, values, mask, per_head)
        return attn.reshape(decodes, self.num_heads, self.head_dim)


def _end(chunk: PrefillChunk) -> int:
    return chunk.token_start + chunk.num_tokens


def pick_attention(name: str, device: torch.device, head_dim: int) -> str:
    """auto: the paged Triton attention kernels on CUDA when Triton is there and head_dim suits them (sliding
    windows, soft-capping and sinks included), else SDPA."""
    if name != "auto":
        return name
    if device.type != "cuda" or head_dim < 16 or head_dim & (head_dim - 1):
        return "sdpa"
    try:
        import triton  # noqa: F401  # pyright: ignore[reportMissingImports]
    except ImportError:
        return "sdpa"
    return "triton"


def make_backend(
    name: str, num_heads: int, num_kv_heads: int, head_dim: int, scale: float = 0.0, softcap: float = 0.0
) -> AttentionBackend:
    """`scale`: the scores' (0: head_dim ** -0.5); `softcap`: tanh soft-capping of the scores (0: none)."""
    if name == "triton":
        from engine_svc.model.triton_attention import TritonBackend

        return TritonBackend(num_heads, num_kv_heads, head_dim, scale, softcap)
    return SdpaBackend(num_heads, num_kv_heads, head_dim, scale, softcap)
