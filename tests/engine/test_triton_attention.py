"""The Triton kernels against dense references. CUDA (`python -m pytest tests/engine/test_triton_attention.py` on
the GPU machine, bf16), or on the CPU through Triton's interpreter with triton installed (float32: the interpreter
mishandles bf16; about a minute on two cores): `TRITON_INTERPRET=1 python -m pytest tests/engine/test_triton_attention.py`.
Skipped otherwise."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("the Triton kernels need CUDA (or TRITON_INTERPRET=1)", allow_module_level=True)
triton_attention = pytest.importorskip("engine_svc.model.triton_attention")
from engine_svc.model.attention import AttentionMetadata, PrefillChunk, SdpaBackend  # noqa: E402
from engine_svc.model.triton_prefill import prefill_attention  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32
BLOCK_SIZE, NUM_BLOCKS, WIDTH = 16, 40, 9
LENGTHS = [1, 15, 16, 17, 70, 144]  # inside one block, block edges, several tiles, a full table


def paged_cache(kv_heads: int, dim: int):
    """A random bf16 cache and block tables giving each sequence of LENGTHS distinct, shuffled blocks."""
    torch.manual_seed(0)
    cache = torch.randn(NUM_BLOCKS * BLOCK_SIZE, 2, kv_heads, dim, device=DEVICE, dtype=DTYPE)
    order = torch.randperm(NUM_BLOCKS - 1) + 1
    tables = torch.zeros(len(LENGTHS), WIDTH, dtype=torch.int64)
    used = 0
    for row, length in enumerate(LENGTHS):
        count = -(-length // BLOCK_SIZE)
        tables[row, :count] = order[used : used + count]
        used += count
    return cache, tables.to(DEVICE)


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
    lengths = torch.tensor(LENGTHS, device=DEVICE)
    q = torch.randn(len(LENGTHS), heads, dim, device=DEVICE, dtype=DTYPE)
    got = triton_attention.paged_attention(q, cache, tables, lengths, BLOCK_SIZE, dim**-0.5)
    expected = reference(q, cache, tables, torch.arange(len(LENGTHS)), lengths)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("heads,kv_heads,dim", [(8, 2, 64), (32, 8, 128)])
def test_prefill_rows_see_their_own_prefix(heads, kv_heads, dim):
    cache, tables = paged_cache(kv_heads, dim)
    # Rows of chunks of sequences 4 (positions 0..69, a fresh prompt) and 5 (positions 100..143, continuing).
    table_index = torch.tensor([4] * 70 + [5] * 44, device=DEVICE)
    lengths = torch.tensor(list(range(1, 71)) + list(range(101, 145)), device=DEVICE)
    q = torch.randn(len(table_index), heads, dim, device=DEVICE, dtype=DTYPE)
    got = triton_attention.paged_attention(q, cache, tables, lengths, BLOCK_SIZE, dim**-0.5, table_index)
    expected = reference(q, cache, tables, table_index, lengths)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("splits,heads_first", [(2, False), (4, False), (16, False), (1, True), (4, True)])
def test_split_context_and_heads_first_grid_equal_one_program(splits, heads_first):
    cache, tables = paged_cache(8, 64)
    lengths = torch.tensor(LENGTHS, device=DEVICE)
    q = torch.randn(len(LENGTHS), 32, 64, device=DEVICE, dtype=DTYPE)
    got = triton_attention.paged_attention(
        q, cache, tables, lengths, BLOCK_SIZE, 64**-0.5, splits=splits, heads_first=heads_first
    )
    expected = reference(q, cache, tables, torch.arange(len(LENGTHS)), lengths)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)


def test_rope_store_matches_rope_split_and_index_copy():
    from engine_svc.model.fused_ops import rope_split

    heads, kv_heads, dim, tokens = 32, 8, 64, 5
    torch.manual_seed(1)
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * dim, device=DEVICE, dtype=DTYPE)
    angles = torch.rand(tokens, dim // 2, device=DEVICE) * 6
    cos = torch.cat([angles.cos()] * 2, -1).to(DTYPE)[:, None]
    sin = torch.cat([angles.sin()] * 2, -1).to(DTYPE)[:, None]
    slots = torch.tensor([3, 17, 40, 41, 99], device=DEVICE)
    expected_cache = torch.zeros(128, 2, kv_heads, dim, device=DEVICE, dtype=DTYPE)
    expected_q, kv = rope_split(qkv.float(), cos.float(), sin.float(), heads, kv_heads)
    expected_cache.index_copy_(0, slots, kv.to(DTYPE))
    cache = torch.zeros_like(expected_cache)
    q = triton_attention.rope_store(qkv, cos, sin, slots, cache, heads)
    torch.testing.assert_close(q, expected_q.to(DTYPE), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(cache, expected_cache, atol=2e-2, rtol=2e-2)


def test_rope_store_with_qk_norm_matches_the_unfused_norm_then_rope():
    from engine_svc.model.attention import QkNorm
    from engine_svc.model.fused_ops import qk_norm, rope_split

    heads, kv_heads, dim, tokens = 16, 4, 128, 3
    torch.manual_seed(2)
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * dim, device=DEVICE, dtype=DTYPE) * 3
    norms = QkNorm(torch.rand(dim, device=DEVICE, dtype=DTYPE) + 0.5, torch.rand(dim, device=DEVICE, dtype=DTYPE), 1e-6)
    angles = torch.rand(tokens, dim // 2, device=DEVICE) * 6
    cos = torch.cat([angles.cos()] * 2, -1).to(DTYPE)[:, None]
    sin = torch.cat([angles.sin()] * 2, -1).to(DTYPE)[:, None]
    slots = torch.tensor([5, 6, 70], device=DEVICE)
    normed = qk_norm(qkv.float(), norms.q_weight.float(), norms.k_weight.float(), norms.eps, heads)
    expected_q, kv = rope_split(normed, cos.float(), sin.float(), heads, kv_heads)
    expected_cache = torch.zeros(128, 2, kv_heads, dim, device=DEVICE, dtype=DTYPE).index_copy_(0, slots, kv.to(DTYPE))
    cache = torch.zeros_like(expected_cache)
    q = triton_attention.rope_store(qkv, cos, sin, slots, cache, heads, norms)
    torch.testing.assert_close(q, expected_q.to(DTYPE), atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(cache, expected_cache, atol=3e-2, rtol=3e-2)
    assert torch.equal(
        cache[slots, 1], qkv.view(tokens, -1, dim)[:, heads + kv_heads :]
    )  # v is neither normed nor turned


def test_advance_kernel_equals_torch_ops():
    from engine_svc.model.attention import AttentionBackend

    tables = torch.randint(1, 50, (5, 4), device=DEVICE)
    positions = torch.tensor([0, 14, 15, 47, 63], device=DEVICE)  # block edges, the last column, past it
    metas = []
    for _ in range(2):
        metas.append(
            (
                positions.clone(),
                AttentionMetadata(
                    slot_mapping=torch.zeros(5, dtype=torch.int64, device=DEVICE),
                    block_size=16,
                    num_decodes=5,
                    decode_block_tables=tables,
                    decode_context_lens=positions + 1,
                ),
            )
        )
    triton_attention.TritonBackend(32, 8, 64).advance(*metas[0])
    AttentionBackend().advance(*metas[1])
    (got_positions, got), (want_positions, want) = metas
    assert torch.equal(got_positions, want_positions) and torch.equal(got.slot_mapping, want.slot_mapping)
    assert torch.equal(got.decode_context_lens, want.decode_context_lens)


# Prefill chunks as (context start, tokens): fresh and continuing, around block (16) and tile edges.
CHUNKS = [(0, 1), (0, 300), (1, 16), (15, 17), (16, 64), (17, 33), (100, 129), (0, 15), (100, 2), (16, 1)]
LEAD = 3  # rows before the chunks (a mixed step's decodes), which the prefill kernel leaves alone


def prefill_step(kv_heads: int, dim: int, dtype, chunks=CHUNKS):
    """A random cache, every chunk's sequence on distinct shuffled blocks; the flat block list and the prefill
    table [chunks, 4] (first row, tokens, context start, first block) as the runner packs them."""
    torch.manual_seed(0)
    counts = [-(-(start + n) // BLOCK_SIZE) for start, n in chunks]
    cache = torch.randn(sum(counts) * BLOCK_SIZE + BLOCK_SIZE, 2, kv_heads, dim, device=DEVICE, dtype=dtype)
    blocks = (torch.randperm(sum(counts)) + 1).tolist()
    table, row, first = [], LEAD, 0
    for (start, n), count in zip(chunks, counts):
        table.append([row, n, start, first])
        row, first = row + n, first + count
    return cache, torch.tensor(blocks, device=DEVICE), torch.tensor(table, device=DEVICE), row


def reference_prefill(q, cache, blocks, table):
    """Chunk by chunk: gather its sequence's K/V and run SDPA (every query head, float32) with an explicit
    causal mask: token i of a chunk after `start` cached tokens sees keys 0..start + i."""
    out = torch.zeros_like(q, dtype=torch.float32)
    group = q.shape[1] // cache.shape[2]
    for row, n, start, first in table.tolist():
        slots = [blocks[first + t // BLOCK_SIZE].item() * BLOCK_SIZE + t % BLOCK_SIZE for t in range(start + n)]
        k, v = (x.repeat_interleave(group, dim=1).transpose(0, 1) for x in cache[slots].float().unbind(1))
        mask = torch.arange(start + n, device=q.device)[None, :] <= start + torch.arange(n, device=q.device)[:, None]
        queries = q[row : row + n].float().transpose(0, 1)
        attn = F.scaled_dot_product_attention(queries, k, v, attn_mask=mask, scale=q.shape[-1] ** -0.5)
        out[row : row + n] = attn.transpose(0, 1)
    return out.to(q.dtype)


@pytest.mark.parametrize("group,dim", [(1, 64), (4, 128), (8, 64), (8, 128), (7, 64)])  # 7: a padded group
def test_prefill_kernel_equals_dense_causal_attention(group, dim):
    kv_heads = 2
    cache, blocks, table, rows = prefill_step(kv_heads, dim, DTYPE)
    q = torch.randn(rows, group * kv_heads, dim, device=DEVICE, dtype=DTYPE)
    out = torch.full_like(q, 7.0)
    longest = max(n for _, n in CHUNKS)
    prefill_attention(q, cache, blocks, table, longest, BLOCK_SIZE, dim**-0.5, out=out)
    assert torch.all(out[:LEAD] == 7.0)
    expected = reference_prefill(q, cache, blocks, table)
    torch.testing.assert_close(out[LEAD:], expected[LEAD:], atol=2e-2, rtol=2e-2)


def test_prefill_kernel_in_float32():
    cache, blocks, table, rows = prefill_step(2, 64, torch.float32, CHUNKS[:4])
    q = torch.randn(rows, 8, 64, device=DEVICE)
    got = prefill_attention(q, cache, blocks, table, 300, BLOCK_SIZE, 64**-0.5)
    expected = reference_prefill(q, cache, blocks, table)
    torch.testing.assert_close(got[LEAD:], expected[LEAD:], atol=1e-4, rtol=1e-4)


def mixed_step(heads: int, kv_heads: int, dim: int):
    """q and the metadata of one step: LEAD decode rows (sequences of 1, 17 and 40 tokens on the chunks' blocks:
    any cached rows do) and the prefill chunks CHUNKS[4:] (fresh and continuing); and the cache."""
    cache, blocks, table, rows = prefill_step(kv_heads, dim, DTYPE, CHUNKS[4:])
    decode_tables = blocks[:9].view(LEAD, 3)
    decode_lens = torch.tensor([1, 17, 40], device=DEVICE)
    slots = [
        t[(n - 1) // BLOCK_SIZE].item() * BLOCK_SIZE + (n - 1) % BLOCK_SIZE for t, n in zip(decode_tables, decode_lens)
    ]
    prefills = []
    for row, n, start, first in table.tolist():
        count = -(-(start + n) // BLOCK_SIZE)
        chunk_blocks = blocks[first : first + count]
        prefills.append(PrefillChunk(row, n, start, chunk_blocks))
        slots += [chunk_blocks[t // BLOCK_SIZE].item() * BLOCK_SIZE + t % BLOCK_SIZE for t in range(start, start + n)]
    meta = AttentionMetadata(torch.tensor(slots, device=DEVICE), BLOCK_SIZE, LEAD, decode_tables, decode_lens, prefills)
    meta.prefill_table, meta.prefill_blocks = table, blocks
    return torch.randn(rows, heads, dim, device=DEVICE, dtype=DTYPE), cache, meta


def sdpa_reference(q, cache, meta, window=0, sinks=None, softcap=0.0):
    """SdpaBackend's output (transformers' semantics of windows, sinks and soft-caps) in float32."""
    sdpa = SdpaBackend(q.shape[1], cache.shape[2], q.shape[2], softcap=softcap)
    sdpa.prepare(meta)
    kv = cache[meta.slot_mapping].float()
    return sdpa.forward(
        q.float(), kv, cache.float(), meta, window=window, sinks=None if sinks is None else sinks.float()
    )


def test_backend_mixed_step_equals_sdpa_backend():
    """Decode rows (the decode kernel) and prefill chunks (the prefill kernel) of one step, against SdpaBackend."""
    heads, kv_heads, dim = 8, 2, 64
    q, cache, meta = mixed_step(heads, kv_heads, dim)
    got = triton_attention.TritonBackend(heads, kv_heads, dim).forward(q, None, cache, meta)
    torch.testing.assert_close(got.float(), sdpa_reference(q, cache, meta), atol=2e-2, rtol=2e-2)
    # Into a given buffer (piecewise graphs read it): the same values, and that buffer returned.
    out = torch.full_like(q, float("nan"))
    assert triton_attention.TritonBackend(heads, kv_heads, dim).forward(q, None, cache, meta, out=out) is out
    torch.testing.assert_close(out, got)


def sink_logits(heads: int) -> torch.Tensor:
    """Sinks large enough to take much of each softmax (the scores of these random q, k are about N(0, 1))."""
    return (torch.randn(heads, generator=torch.Generator().manual_seed(3)) * 2).to(DEVICE, DTYPE)


# (window, sinks, soft-cap): windows under a query tile (24 < BLOCK_M), over several key tiles (70), none.
VARIANTS = [(24, True, 0.0), (70, False, 1.0), (0, True, 1.5), (70, True, 2.0)]


@pytest.mark.parametrize("window,sinks,softcap", VARIANTS)
def test_backend_windows_sinks_softcap_equal_sdpa_backend(window, sinks, softcap):
    """A mixed step (decode rows, fresh and continuing prefill chunks, contexts past the window) of a windowed,
    sinked or soft-capped layer against SdpaBackend; the prefill kernel also with 16-key tiles, so that a window
    spans masked tiles at both of its edges and unmasked ones between."""
    heads, kv_heads, dim = 8, 2, 64
    q, cache, meta = mixed_step(heads, kv_heads, dim)
    per_head = sink_logits(heads) if sinks else None
    expected = sdpa_reference(q, cache, meta, window, per_head, softcap)
    backend = triton_attention.TritonBackend(heads, kv_heads, dim, softcap=softcap)
    got = backend.forward(q, None, cache, meta, window=window, sinks=per_head)
    torch.testing.assert_close(got.float(), expected, atol=2e-2, rtol=2e-2)
    table, blocks, longest = meta.prefill_table, meta.prefill_blocks, max(c.num_tokens for c in meta.prefills)
    assert table is not None and blocks is not None
    narrow = prefill_attention(q, cache, blocks, table, longest, BLOCK_SIZE, dim**-0.5, None, window, per_head,
                               softcap, block_n=16)  # fmt: skip
    torch.testing.assert_close(narrow[LEAD:].float(), expected[LEAD:], atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("window,sinks,softcap,splits", [(40, True, 0.0, 4), (20, False, 1.0, 1), (0, True, 1.5, 2),
                                                          (16, True, 2.0, 16)])  # fmt: skip
def test_split_decode_windows_sinks_softcap_equal_sdpa_backend(window, sinks, softcap, splits):
    """Decode rows of LENGTHS (1 to 144 tokens) split over programs of 16-token tiles: a window starts mid-block,
    some splits fall wholly before it or are empty, and the sink is counted once by the combine."""
    heads, kv_heads, dim = 8, 2, 64
    cache, tables = paged_cache(kv_heads, dim)
    lengths = torch.tensor(LENGTHS, device=DEVICE)
    slots = torch.zeros(len(LENGTHS), dtype=torch.int64, device=DEVICE)
    meta = AttentionMetadata(slots, BLOCK_SIZE, len(LENGTHS), tables, lengths)
    q = torch.randn(len(LENGTHS), heads, dim, device=DEVICE, dtype=DTYPE)
    per_head = sink_logits(heads) if sinks else None
    got = triton_attention.paged_attention(q, cache, tables, lengths, BLOCK_SIZE, dim**-0.5, None, splits, None,
                                           window, per_head, softcap, tile=16)  # fmt: skip
    expected = sdpa_reference(q, cache, meta, window, per_head, softcap)
    torch.testing.assert_close(got.float(), expected, atol=2e-2, rtol=2e-2)


def test_wide_heads_window_and_softcap_equal_sdpa_backend():
    """Gemma's 256-wide heads (one KV head for four query heads, as Gemma 3 270M) take the narrower prefill tiles."""
    heads, kv_heads, dim = 4, 1, 256
    q, cache, meta = mixed_step(heads, kv_heads, dim)
    expected = sdpa_reference(q, cache, meta, 24, None, 1.0)
    got = triton_attention.TritonBackend(heads, kv_heads, dim, softcap=1.0).forward(q, None, cache, meta, window=24)
    torch.testing.assert_close(got.float(), expected, atol=2e-2, rtol=2e-2)


def test_runner_steps_equal_the_sdpa_backend():
    """Through the model runner (its packed prefill table included): fresh, continuing, mixed and decode-only
    steps of a 2-layer random Llama give the same logits and second-layer K/V with either backend."""
    from bench.engine.shapes import build_model
    from engine_svc.model.runner import ModelRunner
    from engine_svc.scheduling.sampling import SamplingConfig
    from engine_svc.scheduling.sequence import Chunk, Sequence

    model = build_model("llama-tiny", DEVICE, DTYPE, max_len=8192)
    runners = [
        ModelRunner(model, block_size=16, num_blocks=64, max_num_seqs=8, max_model_len=512, cuda_graphs=False)
        for _ in range(2)
    ]
    layer = runners[1].model.layer0
    runners[1].backend = triton_attention.TritonBackend(layer.num_heads, layer.num_kv_heads, layer.head_dim)
    g = torch.Generator().manual_seed(0)
    a, b, c, d = (Sequence(name, 0, torch.randint(3, 500, (n,), generator=g).tolist(), SamplingConfig())
                  for name, n in (("a", 70), ("b", 130), ("c", 33), ("d", 50)))  # fmt: skip
    for seq, first in ((a, 1), (b, 10), (c, 30), (d, 40)):
        seq.block_ids = list(range(first, first + -(-(seq.num_tokens + 1) // 16)))
    steps = [  # (tokens sampled before the step, its chunks)
        ([], [Chunk(a, 0, 40), Chunk(b, 0, 17)]),  # fresh chunks
        ([], [Chunk(a, 40, 30), Chunk(b, 17, 100), Chunk(c, 0, 33)]),  # continuing after 40 and 17, and fresh
        ([], [Chunk(b, 117, 13)]),  # continuing after 117
        ([(a, 7), (b, 11), (c, 9)], [Chunk(a, 70, 1), Chunk(c, 33, 1), Chunk(b, 130, 1), Chunk(d, 0, 50)]),
        ([(a, 8)], [Chunk(a, 71, 1)]),  # decode only
    ]
    for sampled, chunks in steps:
        for seq, token in sampled:
            seq.append(token)
        logits = [runner.execute(chunks).float() for runner in runners]
        torch.testing.assert_close(logits[1], logits[0], atol=5e-2, rtol=5e-2)
        caches = [runner.kv_caches[-1].float() for runner in runners]
        torch.testing.assert_close(caches[1], caches[0], atol=5e-2, rtol=5e-2)


FP8 = torch.float8_e4m3fn
# Triton's interpreter rounds float32 to e4m3 wrongly where rounding up crosses a power of two (1.99 -> 1.0).
needs_e4m3_rounding = pytest.mark.skipif(DEVICE == "cpu", reason="the interpreter's e4m3 rounding is wrong")


def test_decode_and_prefill_kernels_over_an_fp8_cache():
    """An e4m3 cache (--kv-cache-dtype fp8): both kernels widen what they load and match the references over
    the same cache widened to float32 (q and the softmax weights go through float16 on the way)."""
    heads, kv_heads, dim = 32, 8, 128
    cache, tables = paged_cache(kv_heads, dim)
    cache = cache.to(FP8)
    lengths = torch.tensor(LENGTHS, device=DEVICE)
    q = torch.randn(len(LENGTHS), heads, dim, device=DEVICE, dtype=DTYPE)
    for splits in (1, 4):
        got = triton_attention.paged_attention(q, cache, tables, lengths, BLOCK_SIZE, dim**-0.5, splits=splits)
        expected = reference(q, cache.float(), tables, torch.arange(len(LENGTHS)), lengths)
        torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)
    cache, blocks, table, rows = prefill_step(2, 128, DTYPE)
    cache = cache.to(FP8)
    q = torch.randn(rows, 8, 128, device=DEVICE, dtype=DTYPE)
    got = prefill_attention(q, cache, blocks, table, max(n for _, n in CHUNKS), BLOCK_SIZE, 128**-0.5)
    expected = reference_prefill(q, cache.float(), blocks, table)
    torch.testing.assert_close(got[LEAD:], expected[LEAD:], atol=2e-2, rtol=2e-2)


@needs_e4m3_rounding
def test_rope_store_rounds_into_an_fp8_cache_once():
    from engine_svc.model.fused_ops import rope_split

    heads, kv_heads, dim, tokens = 8, 2, 64, 4
    torch.manual_seed(2)
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * dim, device=DEVICE, dtype=DTYPE) * 4
    angles = torch.rand(tokens, dim // 2, device=DEVICE) * 6
    cos = torch.cat([angles.cos()] * 2, -1).to(DTYPE)[:, None]
    sin = torch.cat([angles.sin()] * 2, -1).to(DTYPE)[:, None]
    slots = torch.tensor([1, 5, 16, 30], device=DEVICE)
    _, kv = rope_split(qkv.float(), cos.float(), sin.float(), heads, kv_heads)
    cache = torch.zeros(32, 2, kv_heads, dim, device=DEVICE, dtype=FP8)
    triton_attention.rope_store(qkv, cos, sin, slots, cache, heads)
    written = cache[slots].float()
    # Within half an e4m3 step of the float32 value (3 mantissa bits), and unwritten rows untouched.
    torch.testing.assert_close(written, kv.to(FP8).float(), atol=2e-3, rtol=1 / 16)
    assert not cache.float()[[0, 2, 31]].any()


@needs_e4m3_rounding
def test_runner_over_an_fp8_cache_equals_the_sdpa_backend():
    """--kv-cache-dtype fp8 through the runner: the Triton kernels and SdpaBackend (which narrows on the write and
    widens on the gather) agree, and both stay near the full-precision cache."""
    from bench.engine.shapes import build_model
    from engine_svc.model.runner import ModelRunner
    from engine_svc.scheduling.sampling import SamplingConfig
    from engine_svc.scheduling.sequence import Chunk, Sequence

    model = build_model("llama-tiny", DEVICE, DTYPE, max_len=8192)
    sizes = dict(block_size=16, num_blocks=32, max_num_seqs=4, max_model_len=256, cuda_graphs=False)
    runners = [ModelRunner(model, **sizes, kv_cache_dtype=kv) for kv in ("fp8", "fp8", "auto")]
    assert runners[0].kv_caches[0].dtype == FP8 and runners[2].kv_caches[0].dtype == DTYPE
    layer = runners[1].model.layer0
    runners[1].backend = triton_attention.TritonBackend(layer.num_heads, layer.num_kv_heads, layer.head_dim)
    g = torch.Generator().manual_seed(0)
    a, b = (Sequence(name, 0, torch.randint(3, 500, (n,), generator=g).tolist(), SamplingConfig())
            for name, n in (("a", 40), ("b", 70)))  # fmt: skip
    a.block_ids, b.block_ids = [1, 2, 3], [4, 5, 6, 7, 8]
    steps = [  # fresh chunks (a's ends and samples), b continuing to its end, one decode row each
        lambda: [Chunk(a, 0, 40), Chunk(b, 0, 30)],
        lambda: [Chunk(b, 30, 40)],
        lambda: [Chunk(a, 40, 1), Chunk(b, 70, 1)],
    ]
    for step in steps:
        chunks = step()
        sdpa, kernels, full = (runner.execute(chunks).float() for runner in runners)
        torch.testing.assert_close(kernels, sdpa, atol=5e-2, rtol=5e-2)
        torch.testing.assert_close(sdpa, full, atol=1e-1, rtol=1e-1)
        for row, chunk in enumerate(c for c in chunks if c.samples):
            chunk.seq.append(int(full[row].argmax()))
