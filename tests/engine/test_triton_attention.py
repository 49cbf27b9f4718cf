"""The paged Triton attention kernel against a dense reference. CUDA only (Triton's CPU interpreter cannot run
it): `python -m pytest tests/engine/test_triton_attention.py` on the GPU machine."""

from __future__ import annotations

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("the Triton kernel needs CUDA", allow_module_level=True)
triton_attention = pytest.importorskip("engine_svc.model.triton_attention")

BLOCK_SIZE, NUM_BLOCKS, WIDTH = 16, 40, 9
LENGTHS = [1, 15, 16, 17, 70, 144]  # inside one block, block edges, several tiles, a full table


def paged_cache(kv_heads: int, dim: int):
    """A random bf16 cache and block tables giving each sequence of LENGTHS distinct, shuffled blocks."""
    torch.manual_seed(0)
    cache = torch.randn(NUM_BLOCKS * BLOCK_SIZE, 2, kv_heads, dim, device="cuda", dtype=torch.bfloat16)
    order = torch.randperm(NUM_BLOCKS - 1) + 1
    tables = torch.zeros(len(LENGTHS), WIDTH, dtype=torch.int64)
    used = 0
    for row, length in enumerate(LENGTHS):
        count = -(-length // BLOCK_SIZE)
        tables[row, :count] = order[used : used + count]
        used += count
    return cache, tables.cuda()


def reference(q, cache, tables, table_index, lengths):
    """Row by row: gather the first `length` K/V rows of the row's sequence and attend (GQA), in float32."""
    heads, kv_heads = q.shape[1], cache.shape[2]
    out = []
    for row, (table, length) in enumerate(zip(table_index.tolist(), lengths.tolist())):
        slots = [tables[table, t // BLOCK_SIZE].item() * BLOCK_SIZE + t % BLOCK_SIZE for t in range(length)]
        k, v = cache[slots].float().unbind(1)  # [length, kv_heads, dim]
        k, v = (x.repeat_interleave(heads // kv_heads, dim=1).transpose(0, 1) for x in (k, v))
        weights = (q[row].float()[:, None, :] @ k.transpose(1, 2))[:, 0] * q.shape[-1] ** -0.5
        out.append((weights.softmax(-1)[:, None, :] @ v)[:, 0])
    return torch.stack(out).to(q.dtype)


@pytest.mark.parametrize("heads,kv_heads,dim", [(8, 2, 64), (4, 4, 16), (32, 8, 128)])
def test_decode_rows(heads, kv_heads, dim):
    cache, tables = paged_cache(kv_heads, dim)
    lengths = torch.tensor(LENGTHS, device="cuda")
    q = torch.randn(len(LENGTHS), heads, dim, device="cuda", dtype=torch.bfloat16)
    got = triton_attention.paged_attention(q, cache, tables, lengths, BLOCK_SIZE, dim**-0.5)
    expected = reference(q, cache, tables, torch.arange(len(LENGTHS)), lengths)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("heads,kv_heads,dim", [(8, 2, 64), (32, 8, 128)])
def test_prefill_rows_see_their_own_prefix(heads, kv_heads, dim):
    cache, tables = paged_cache(kv_heads, dim)
    # Rows of chunks of sequences 4 (positions 0..69, a fresh prompt) and 5 (positions 100..143, continuing).
    table_index = torch.tensor([4] * 70 + [5] * 44, device="cuda")
    lengths = torch.tensor(list(range(1, 71)) + list(range(101, 145)), device="cuda")
    q = torch.randn(len(table_index), heads, dim, device="cuda", dtype=torch.bfloat16)
    got = triton_attention.paged_attention(q, cache, tables, lengths, BLOCK_SIZE, dim**-0.5, table_index)
    expected = reference(q, cache, tables, table_index, lengths)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("splits", [2, 4, 16])
def test_split_context_equals_one_program(splits):
    cache, tables = paged_cache(8, 64)
    lengths = torch.tensor(LENGTHS, device="cuda")
    q = torch.randn(len(LENGTHS), 32, 64, device="cuda", dtype=torch.bfloat16)
    got = triton_attention.paged_attention(q, cache, tables, lengths, BLOCK_SIZE, 64**-0.5, splits=splits)
    expected = reference(q, cache, tables, torch.arange(len(LENGTHS)), lengths)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)


def test_rope_store_matches_rope_split_and_index_copy():
    from engine_svc.model.fused_ops import rope_split

    heads, kv_heads, dim, tokens = 32, 8, 64, 5
    torch.manual_seed(1)
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * dim, device="cuda", dtype=torch.bfloat16)
    angles = torch.rand(tokens, dim // 2, device="cuda") * 6
    cos = torch.cat([angles.cos()] * 2, -1).to(torch.bfloat16)[:, None]
    sin = torch.cat([angles.sin()] * 2, -1).to(torch.bfloat16)[:, None]
    slots = torch.tensor([3, 17, 40, 41, 99], device="cuda")
    expected_cache = torch.zeros(128, 2, kv_heads, dim, device="cuda", dtype=torch.bfloat16)
    expected_q, kv = rope_split(qkv.float(), cos.float(), sin.float(), heads, kv_heads)
    expected_cache.index_copy_(0, slots, kv.to(torch.bfloat16))
    cache = torch.zeros_like(expected_cache)
    q = triton_attention.rope_store(qkv, cos, sin, slots, cache, heads)
    torch.testing.assert_close(q, expected_q.to(torch.bfloat16), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(cache, expected_cache, atol=2e-2, rtol=2e-2)


def test_advance_kernel_equals_torch_ops():
    from engine_svc.model.attention import AttentionBackend, AttentionMetadata

    tables = torch.randint(1, 50, (5, 4), device="cuda")
    positions = torch.tensor([0, 14, 15, 47, 63], device="cuda")  # block edges, the last column, past it
    metas = []
    for _ in range(2):
        metas.append(
            (
                positions.clone(),
                AttentionMetadata(
                    slot_mapping=torch.zeros(5, dtype=torch.int64, device="cuda"),
                    block_size=16,
                    num_decodes=5,
                    decode_block_tables=tables,
                    decode_context_lens=positions + 1,
                ),
            )
        )
    triton_attention.TritonBackend(32, 8, 64).advance(*metas[0])
    AttentionBackend.advance(None, *metas[1])
    (got_positions, got), (want_positions, want) = metas
    assert torch.equal(got_positions, want_positions) and torch.equal(got.slot_mapping, want.slot_mapping)
    assert torch.equal(got.decode_context_lens, want.decode_context_lens)
