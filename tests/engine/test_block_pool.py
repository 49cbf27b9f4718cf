"""The block pool's prefix cache, without a model: hashing, sharing, salts, reference counts, LRU eviction."""

from __future__ import annotations

import random

from engine_svc.scheduling.block_pool import BlockPool
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.scheduler import Scheduler
from engine_svc.scheduling.sequence import Sequence
from scaleout_common import prefix_hash


def seq(tokens, salt: str = "", rid: str = "r") -> Sequence:
    return Sequence(rid, 0, list(tokens), SamplingConfig(), cache_salt=salt)


def computed(pool: BlockPool, s: Sequence) -> None:
    """Give `s` blocks for its whole prompt and count them computed, as a prefill would."""
    pool.take_cached(s)
    assert pool.grow(s, s.num_tokens)
    s.num_computed = s.num_tokens
    pool.commit(s)


def check_invariants(pool: BlockPool, live: list[Sequence]) -> None:
    held: dict[int, int] = {}
    for s in live:
        for b in s.block_ids:
            held[b] = held.get(b, 0) + 1
    assert all(pool.refs[b] == n for b, n in held.items())
    assert all(pool.refs[b] == 0 for b in range(1, pool.num_blocks) if b not in held)
    assert set(pool.free) == {b for b in range(1, pool.num_blocks) if b not in held}
    assert {b: h for h, b in pool.table.items()} == pool.hash_of


def test_a_second_prompt_with_the_same_prefix_takes_its_full_blocks():
    pool = BlockPool(32, 4, caching=True)
    first = seq(range(10, 30))  # 20 tokens: 5 full blocks
    computed(pool, first)
    second = seq([*range(10, 24), 99, 98])  # shares 14 tokens: 3 full blocks
    assert pool.take_cached(second) == 12
    assert second.block_ids == first.block_ids[:3]
    assert [pool.refs[b] for b in first.block_ids] == [2, 2, 2, 1, 1]
    check_invariants(pool, [first, second])


def test_at_least_the_last_token_is_left_to_compute():
    pool = BlockPool(32, 4, caching=True)
    computed(pool, seq(range(10, 26)))  # 16 tokens, 4 full blocks
    again = seq(range(10, 26))
    assert pool.take_cached(again) == 12 and again.remaining == 4


def test_two_salts_never_share_a_block():
    pool = BlockPool(64, 4, caching=True)
    tokens = list(range(40, 72))
    a = seq(tokens, salt="tenant-a")
    computed(pool, a)
    b = seq(tokens, salt="tenant-b")
    assert pool.take_cached(b) == 0
    assert pool.grow(b, b.num_tokens)
    b.num_computed = b.num_tokens
    pool.commit(b)
    assert not set(a.block_ids) & set(b.block_ids)
    unsalted = seq(tokens)
    assert pool.take_cached(unsalted) == 0
    assert pool.take_cached(seq(tokens, salt="tenant-a")) == 28
    assert prefix_hash.chain("tenant-a", tokens, 4) != prefix_hash.chain("tenant-b", tokens, 4)


def test_released_blocks_stay_cached_and_are_evicted_least_recently_used_first():
    pool = BlockPool(9, 4, caching=True)  # 8 usable blocks
    old, new = seq(range(100, 116), rid="old"), seq(range(200, 216), rid="new")
    for s in (old, new):
        computed(pool, s)
        pool.release(s)
    assert pool.num_free == 8 and pool.num_used == 0 and pool.num_cached == 8
    # Four new blocks evict the least recently released prefix first, from its end.
    filler = seq(range(300, 316), rid="filler")
    assert pool.grow(filler, 16)
    again_new, again_old = seq(range(200, 216)), seq(range(100, 116))
    assert pool.take_cached(again_new) == 12  # all of "new" still there (but its last token)
    assert pool.take_cached(again_old) == 0
    check_invariants(pool, [filler, again_new, again_old])


def test_blocks_holding_nothing_reusable_are_handed_out_before_cached_ones():
    pool = BlockPool(9, 4, caching=True)
    kept = seq(range(100, 116))
    computed(pool, kept)
    pool.release(kept)
    partial = seq(range(500, 502))  # one partial block: never cached
    pool.grow(partial, 2)
    partial.num_computed = 2
    pool.commit(partial)
    pool.release(partial)
    taker = seq(range(600, 616))
    assert pool.grow(taker, 16)  # the 4 never-cached blocks
    assert pool.take_cached(seq(range(100, 116))) == 12


def test_caching_off_shares_nothing():
    pool = BlockPool(32, 4, caching=False)
    first = seq(range(10, 30))
    computed(pool, first)
    assert pool.num_cached == 0 and pool.take_cached(seq(range(10, 30))) == 0


def test_a_sequence_that_wants_prompt_logprobs_computes_its_prompt():
    pool = BlockPool(32, 4, caching=True)
    computed(pool, seq(range(10, 30)))
    wants = seq(range(10, 30))
    wants.want_prompt_logprobs = True
    assert pool.take_cached(wants) == 0


def test_a_reset_drops_every_entry_and_frees_the_unheld_blocks_first():
    pool = BlockPool(17, 4, caching=True)
    held, released = seq(range(10, 26), rid="held"), seq(range(50, 66), rid="released")
    for s in (held, released):
        computed(pool, s)
    blocks = set(released.block_ids)
    pool.release(released)
    assert pool.num_cached == 8 and pool.reset_prefix_cache() == 8
    assert pool.num_cached == 0 and pool.take_cached(seq(range(10, 26))) == 0
    # The released blocks hold nothing reusable now: handed out before any other free block.
    assert set(list(pool.free)[:4]) == blocks
    check_invariants(pool, [held])
    pool.release(held)  # a held block leaves the table too: released, it is plain free
    assert pool.num_cached == 0 and pool.num_free == 16


def test_uncached_tokens_are_what_take_cached_would_leave():
    pool = BlockPool(32, 4, caching=True)
    computed(pool, seq(range(10, 30)))
    probe = seq([*range(10, 24), 99, 98])
    assert pool.uncached_tokens(probe) == 16 - 12 and probe.block_ids == []  # it takes nothing
    assert pool.take_cached(probe) == 12 and probe.remaining == 4
    assert BlockPool(32, 4, caching=False).uncached_tokens(seq(range(10, 30))) == 20


def test_scheduler_preemption_and_random_churn_keep_the_counts_exact():
    rng = random.Random(3)
    pool = BlockPool(24, 4, caching=True)
    scheduler = Scheduler(pool, max_num_seqs=8, max_batched_tokens=64)
    system = [rng.randrange(3, 200) for _ in range(13)]
    live: list[Sequence] = []
    for step in range(400):
        if rng.random() < 0.3:
            s = seq(system + [rng.randrange(3, 200) for _ in range(rng.randrange(1, 20))], rid=f"s{step}")
            scheduler.add(s)
            live.append(s)
        for chunk in scheduler.schedule():
            scheduler.computed(chunk.seq, chunk.num_tokens)
            if chunk.samples:
                chunk.seq.append(rng.randrange(3, 200))
        done = {s for s in live if len(s.output_ids) >= 40 or (s.output_ids and rng.random() < 0.02)}
        scheduler.remove(done)
        live = [s for s in live if s not in done]
        check_invariants(pool, list(scheduler.running))
        assert scheduler.waiting_uncached == sum(entry[2].num_uncached_queued for entry in scheduler.waiting)
    scheduler.remove(set(live))
    check_invariants(pool, [])
    assert scheduler.waiting_uncached == 0 and scheduler.pending_prefill_tokens() == 0
    assert pool.num_used == 0 and pool.hit_tokens > 0 and scheduler.num_preemptions > 0
