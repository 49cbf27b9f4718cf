"""SdpaBackend against plain per-sequence causal attention on random tensors (decodes, fresh prefill chunks
sharing calls, chunks that continue a sequence, in one flat batch), and through the engine against transformers."""

from __future__ import annotations

import asyncio

import pytest
import torch

from engine_svc.model.attention import AttentionMetadata, PrefillChunk, SdpaBackend
from tests.engine.conftest import engine_stub, generate, request, tiny_llama
from tests.engine.test_generate import reference

HEADS, KV_HEADS, DIM, BLOCK = 4, 2, 8, 4


def attention(q, keys, values):
    """Row i of q [n, heads, dim] at the last n positions attends to keys/values [L, kv_heads, dim] up to itself."""
    n, length = q.shape[0], keys.shape[0]
    group = HEADS // KV_HEADS
    keys, values = keys.repeat_interleave(group, 1).double(), values.repeat_interleave(group, 1).double()
    scores = torch.einsum("qhd,khd->hqk", q.double(), keys) * DIM**-0.5
    visible = torch.arange(length)[None, :] <= torch.arange(length - n, length)[:, None]
    weights = scores.masked_fill(~visible, float("-inf")).softmax(-1)
    return torch.einsum("hqk,khd->qhd", weights, values).float()


def batch(parts: list[tuple[str, int, int]]):
    """A flat batch from (kind, context_start, num_tokens) parts, decodes first: q, this step's kv, the cache
    (every sequence's K/V written, as the model does before attention), metadata and the expected output."""
    torch.manual_seed(0)
    parts = sorted(parts, key=lambda p: p[0] != "decode")
    blocks = [-(-(start + n) // BLOCK) for _, start, n in parts]
    cache = torch.zeros((sum(blocks) + 1) * BLOCK, 2, KV_HEADS, DIM)
    qs, kvs, slots, tables, expected = [], [], [], [], []
    meta = AttentionMetadata(slot_mapping=torch.zeros(0, dtype=torch.int64), block_size=BLOCK)
    next_block, row = 1, 0
    for (kind, start, n), count in zip(parts, blocks):
        table = torch.arange(next_block, next_block + count).flip(0)  # blocks need not be in order
        next_block += count
        positions = torch.arange(start + n)
        seq_slots = table[positions // BLOCK] * BLOCK + positions % BLOCK
        seq_kv, q = torch.randn(start + n, 2, KV_HEADS, DIM), torch.randn(n, HEADS, DIM)
        cache[seq_slots] = seq_kv
        qs.append(q), kvs.append(seq_kv[start:]), slots.append(seq_slots[start:])
        expected.append(attention(q, seq_kv[:, 0], seq_kv[:, 1]))
        if kind == "decode":
            tables.append(table)
        else:
            meta.prefills.append(PrefillChunk(row, n, start, table))
        row += n
    meta.slot_mapping = torch.cat(slots)
    if tables:
        width = max(len(t) for t in tables)
        meta.num_decodes = len(tables)
        meta.decode_block_tables = torch.stack([torch.cat([t, t.new_zeros(width - len(t))]) for t in tables])
        meta.decode_context_lens = torch.tensor([start + 1 for kind, start, _ in parts if kind == "decode"])
    return torch.cat(qs), torch.cat(kvs), cache, meta, torch.cat(expected)


@pytest.mark.parametrize("rows_per_call", [1, 8, 64])
@pytest.mark.parametrize(
    "parts, shared_calls",
    [  # shared_calls: prefill calls when every adjacent fresh chunk shares
        ([("fresh", 0, 5)], 1),
        ([("fresh", 0, 5), ("fresh", 0, 1), ("fresh", 0, 9)], 1),
        ([("decode", 6, 1), ("decode", 13, 1), ("fresh", 0, 7), ("fresh", 0, 3)], 1),
        ([("decode", 2, 1), ("prefill", 9, 6), ("fresh", 0, 4), ("fresh", 0, 11)], 2),  # continuing chunk first
        ([("fresh", 0, 4), ("prefill", 3, 2), ("fresh", 0, 3), ("fresh", 0, 2), ("prefill", 8, 1)], 4),
        ([("decode", 4, 1), ("decode", 7, 1)], 0),
    ],
)
def test_fresh_chunks_sharing_calls_equal_per_sequence_attention(parts, shared_calls, rows_per_call):
    q, kv, cache, meta, expected = batch(parts)
    backend = SdpaBackend(HEADS, KV_HEADS, DIM)
    backend.rows_per_call = rows_per_call
    backend.prepare(meta)
    if rows_per_call == 1:
        assert len(meta.prefill_calls) == sum(kind != "decode" for kind, _, _ in parts)
    elif rows_per_call == 64:
        assert len(meta.prefill_calls) == shared_calls
    torch.testing.assert_close(backend.forward(q, kv, cache, meta), expected, atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def attentive_model():
    """A tiny Llama whose greedy tokens depend on the context (see tiny_llama)."""
    return tiny_llama(1)


async def test_engine_greedy_with_shared_prefill_calls_matches_transformers(attentive_model):
    """Fresh prompts of varied lengths share prefill calls (forced here: CPU gives each chunk its own call)."""
    prompts = [
        [1] + [(11 * i + 5 * j) % 200 + 3 for j in range(length)]
        for i, length in enumerate([3, 20, 7, 1, 45, 12, 30, 5, 9, 60, 2, 17])
    ]
    async with engine_stub(attentive_model, "--max-num-batched-tokens", "64", "--block-size", "4") as (stub, service):
        backend = service.loaded.engine.runner.backend
        backend.rows_per_call = 64
        shared, prepare = [], backend.prepare

        def spy(meta):
            prepare(meta)
            shared.append(sum(call.block_ids is None and call.mask is not None for call in meta.prefill_calls))

        backend.prepare = spy
        results = await asyncio.gather(
            *[generate(stub, request(p, temperature=0, max_tokens=10, ignore_eos=True)) for p in prompts]
        )
    assert max(shared) > 0
    for prompt, (_, tokens) in zip(prompts, results):
        assert tokens[0] == reference(attentive_model, prompt, 10)
