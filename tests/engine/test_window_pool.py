"""Sliding-window layers' own KV pool (scheduling/window_pool.py, model/kv_groups.py): the blocks that leave every
query's window go back to the windowed pool while the full-attention layers keep theirs, prefix-cache hits need
the window before the hit point, and the tiny windowed families (families.py) still give transformers' greedy
tokens and logits through the real scheduler and runner: across window wraps, with chunked prefill, a prefix
hit after the window wrapped, and preemption."""

from __future__ import annotations

import pytest
import torch

from bench.engine.shapes import FAMILY_SHAPES
from engine_svc.model.kv_groups import KvGroups
from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.block_pool import BlockPool
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.scheduler import Scheduler
from engine_svc.scheduling.sequence import Sequence
from engine_svc.scheduling.window_pool import WindowedBlockPool
from engine_svc.serving.kv_transfer.peer import KvPeer
from engine_svc.serving.loader import build_engine
from scaleout_common.errors import ServiceError
from tests.engine.conftest import engine_args, request
from tests.engine.families import WINDOW, greedy, logits_of, tiny

BLOCK = 4
PROMPT = [1] + [(7 * j) % 200 + 3 for j in range(29)]  # 30 tokens: over 3 windows of 8
SHARED = 20  # tokens a second prompt shares with PROMPT


def _seq(name: str, tokens: list[int]) -> Sequence:
    return Sequence(name, 0, list(tokens), SamplingConfig())


def test_blocks_that_leave_the_window_are_freed_and_full_ones_kept():
    pool = WindowedBlockPool(40, BLOCK, WINDOW, 12, caching=True)
    seq = _seq("a", PROMPT)
    for start, size in ((0, 12), (12, 12), (24, 6)):  # a chunked prefill
        assert pool.grow(seq, start + size)
        seq.num_computed += size
        pool.commit(seq)
    # Positions 0..29 computed; the next query (30) sees keys 23..30: blocks 0..4 (positions < 20) are free.
    assert pool.grow(seq, 31)
    assert seq.window_block_ids[:5] == [0] * 5 and all(seq.window_block_ids[5:])
    assert len(pool.free) == 39 - 8 and pool.windowed.num_used == 3  # all 8 full blocks; the window's 5, 6, 7
    assert pool.windowed.num_cached == 7  # the freed ones stay cached until handed out
    pool.release(seq)
    assert pool.num_used == 0 and pool.windowed.num_used == 0


def test_a_prefix_hit_needs_the_windows_blocks_before_it():
    pool = WindowedBlockPool(40, BLOCK, WINDOW, 12, caching=True)
    first = _seq("a", PROMPT)
    assert pool.grow(first, 30)
    first.num_computed = 30
    pool.commit(first)
    pool.release(first)
    second = _seq("b", PROMPT[:SHARED] + [9, 8, 7])
    assert pool.uncached_tokens(second) == 3
    assert pool.take_cached(second) == SHARED  # 5 full blocks, the window's 2 before the hit (blocks 3, 4)
    assert second.window_block_ids == [0, 0, 0, *second.window_block_ids[3:]] and all(second.window_block_ids[3:])
    pool.release(second)
    # Block 4's windowed twin evicted: the hit stops before it (its window, blocks 2 and 3, still cached); block
    # 2's too: the hit stops after block 1 (blocks 0 and 1 cached), though the full-attention blocks are all there.
    for evicted, hit in ((4, 16), (2, 8)):
        pool.windowed.hash_of.pop(pool.windowed.table.pop(first.block_hashes[evicted]))
        third = _seq("c", PROMPT[:SHARED] + [9, 8, 7])
        assert pool.take_cached(third) == hit and len(third.window_block_ids) == hit // BLOCK
        pool.release(third)


def _run(model, prompts, *, budget, blocks, window_blocks, new_tokens=6, serial=False):
    """Greedy decoding through the scheduler and runner: each sequence's tokens and the logits rows it sampled
    from (and the scheduler, for its counters)."""
    runner = ModelRunner(model, block_size=BLOCK, num_blocks=0, max_num_seqs=4, max_model_len=128, cuda_graphs=False)
    runner.allocate_kv(blocks, window_blocks)
    pool = WindowedBlockPool(blocks, BLOCK, runner.window_group, window_blocks, caching=True)
    scheduler = Scheduler(pool, 4, budget)
    seqs = [_seq(str(i), p) for i, p in enumerate(prompts)]
    rows: dict[Sequence, list[torch.Tensor]] = {s: [] for s in seqs}
    pending = list(seqs)
    while pending or scheduler.running or scheduler.num_waiting:
        while pending and (not serial or not (scheduler.running or scheduler.num_waiting)):
            scheduler.add(pending.pop(0))
        chunks = scheduler.schedule()
        with torch.inference_mode():
            logits = runner.execute(chunks)
        sampled = [c for c in chunks if c.samples]
        for c in chunks:
            scheduler.computed(c.seq, c.num_tokens)
        for c, row in zip(sampled, logits):
            rows[c.seq].append(row)
            c.seq.append(int(row.argmax()))
        scheduler.remove({c.seq for c in sampled if len(c.seq.output_ids) == new_tokens})
    return seqs, rows, scheduler


def _check(model, seqs, rows):
    for seq in seqs:
        assert seq.output_ids == greedy(model, seq.prompt_ids, len(seq.output_ids))
        expected = logits_of(model, seq.prompt_ids + seq.output_ids)[len(seq.prompt_ids) - 1 : -1]
        torch.testing.assert_close(torch.stack(rows[seq][-len(expected) :]), expected, atol=2e-4, rtol=2e-4)


@pytest.mark.parametrize("family", ["gemma3", "gpt_oss", "mistral"])
def test_windowed_families_match_transformers_with_freed_blocks(family):
    """Chunked prefill over window wraps, then a prompt that hits the first one's cached prefix after its window
    wrapped (served one after the other)."""
    model = tiny(family)
    prompts = [PROMPT, PROMPT[:SHARED] + [11, 12, 13, 14, 15]]
    seqs, rows, scheduler = _run(model, prompts, budget=7, blocks=40, window_blocks=14, serial=True)
    _check(model, seqs, rows)
    assert seqs[1].num_cached_tokens == SHARED
    assert isinstance(scheduler.pool, WindowedBlockPool) and scheduler.pool.windowed.num_used == 0


def test_preemption_recomputes_into_both_pools():
    """Three sequences in a windowed pool of 7 blocks (two decodes' windows): the last admitted is preempted,
    recomputed, and its tokens and logits are still transformers'."""
    model = tiny("gemma3")
    prompts = [PROMPT, PROMPT[3:] + [5, 6], PROMPT[::-1]]
    seqs, rows, scheduler = _run(model, prompts, budget=16, blocks=60, window_blocks=8, new_tokens=8)
    assert scheduler.num_preemptions > 0
    _check(model, seqs, rows)


def test_the_loader_groups_windowed_families_only():
    """Gemma 3 gets the windowed pool (its 2 windowed layers sized to the windows, not the context) and refuses
    P/D steps, which carry one block list (a P/D --kv-role at start); Qwen3, with no windowed layer, or Gemma 3 under
    --disable-hybrid-kv-cache-manager, the one pool as before."""
    flags = ["--block-size", str(BLOCK), "--max-num-batched-tokens", "16", "--max-num-seqs", "4", "--device", "cpu"]
    handoff = request(PROMPT, max_tokens=1)
    handoff.kv_transfer.hand_off = True
    for family, more, windowed in (("gemma3", [], True), ("qwen3", [], False),
                                   ("gemma3", ["--disable-hybrid-kv-cache-manager"], False)):  # fmt: skip
        args = engine_args(*flags, *more)
        engine = build_engine(tiny(family), args, model_name="t").engine
        pool, runner = engine.scheduler.pool, engine.runner  # pyright: ignore[reportAttributeAccessIssue]
        assert type(pool) is (WindowedBlockPool if windowed else BlockPool)
        sizes = {pool.num_blocks} | ({pool.windowed.num_blocks} if isinstance(pool, WindowedBlockPool) else set())
        assert {c.shape[0] // BLOCK for c in runner.kv_caches} == sizes
        if isinstance(pool, WindowedBlockPool):
            assert pool.windowed.num_blocks == 1 + 4 * (3 + 1) + 4 < pool.num_blocks
            with pytest.raises(ServiceError) as refused:
                KvPeer(args, 0, engine, "t", "").step(handoff)
            assert refused.value.reason == "KV_TRANSFER_UNAVAILABLE" and "sliding-window" in refused.value.message
        else:
            assert KvPeer(args, 0, engine, "t", "").step(handoff) is not None
    with pytest.raises(ValueError, match=r"--kv-role prefill: .* sliding-window"):
        build_engine(tiny("gemma3"), engine_args(*flags, "--kv-role", "prefill"), model_name="t")


def test_gemma3_270m_admits_more_long_sequences_at_the_same_memory():
    """The capacity gain at Gemma 3 270M's shape (bf16, 16-token blocks, 4 GiB of KV cache, 256 sequences of
    up to 32,768 tokens, 8,192-token steps, 32-step decode loops)."""
    shape = FAMILY_SHAPES["gemma3-270m"]
    windows = tuple(shape["sliding_window"] if t == "sliding_attention" else 0 for t in shape["layer_types"])
    groups = KvGroups.of(windows, block_size=16, max_model_len=32768, max_num_seqs=256, step_tokens=8192, lookahead=32)
    layer_bytes = 16 * 2 * shape["num_key_value_heads"] * shape["head_dim"] * 2
    budget, wanted = 4 << 30, 256 * 2048 + 1
    one, _ = KvGroups(full_layers=18).split(budget, layer_bytes, wanted=wanted, cap=False)
    main, window = groups.split(budget, layer_bytes, wanted=wanted, cap=False)
    assert (groups.full_layers, groups.window_layers, groups.window) == (3, 15, 512)
    assert main * 3 * layer_bytes + window * 15 * layer_bytes <= budget
    # Tokens of context the cache holds: 619,776 against 233,008 (2.66x; 18 sequences of 32,768 tokens, not 7),
    # the windowed pool (9,729 blocks) sized for 256 running windows; the bound, 18 / 3 layers, is 6x.
    assert (one, main, window) == (14563, 38736, 9729)
