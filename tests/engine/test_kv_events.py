"""KV events: the pool's table changes, the hub's batches, and SubscribeKvEvents through the real engine server —
a subscriber that joins late (snapshot + live batches) or resumes holds exactly the engine's prefix table."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from engine_svc.scheduling.block_pool import BlockPool
from engine_svc.serving.kv_hub import KvHub
from scaleout.v1 import control_pb2, control_pb2_grpc, engine_pb2, kv_events_pb2
from scaleout_common import prefix_hash
from tests.engine.conftest import engine_stub, generate, request
from tests.engine.test_block_pool import computed, seq

SYSTEM = [1] + [(7 * j) % 200 + 5 for j in range(23)]


def test_the_hub_mirrors_the_pool_through_stores_evictions_and_resets():
    pool = BlockPool(12, 4, caching=True)
    hub = pool.events = KvHub(4)
    rng = random.Random(0)
    for i in range(40):
        s = seq(
            SYSTEM[: rng.randrange(4, 24)] + [rng.randrange(5, 200) for _ in range(rng.randrange(0, 9))],
            salt=str(i % 3),
        )
        computed(pool, s)
        pool.release(s)
        hub.flush()
        if i == 25:
            pool.reset_prefix_cache()
            hub.flush()
            assert hub.table() == {}
        assert set(hub.table()) == set(pool.table)
    for h, (parent, tokens, salt) in hub.table().items():  # each hash follows from its parent and tokens
        assert prefix_hash.block_hash(parent or prefix_hash.root(salt), tokens) == h


class Consumer:
    """What a router holds: hash -> (parent, tokens, salt), from KvEventBatch messages."""

    def __init__(self):
        self.table: dict[bytes, tuple] = {}
        self.sequence = -1
        self.instance = ""

    def apply(self, batch: kv_events_pb2.KvEventBatch) -> None:
        assert batch.snapshot or batch.sequence == self.sequence + 1, "a gap in the live batches"
        self.sequence, self.instance = batch.sequence, batch.instance_id
        size = batch.block_size
        for event in batch.events:
            kind = event.WhichOneof("event")
            if kind == "all_blocks_cleared":
                self.table.clear()
            elif kind == "blocks_removed":
                for h in event.blocks_removed.block_hashes:
                    self.table.pop(h, None)
            else:
                stored, parent = event.blocks_stored, event.blocks_stored.parent_block_hash or None
                for i, h in enumerate(stored.block_hashes):
                    tokens = tuple(stored.token_ids[i * size : (i + 1) * size])
                    self.table[h] = (parent, tokens, stored.cache_salt)
                    parent = h


async def _traffic(stub, count: int, seed: int, at_once: int = 1) -> None:
    rng = random.Random(seed)
    messages = []
    for i in range(count):
        prompt = SYSTEM[: rng.randrange(5, 24)] + [rng.randrange(5, 200) for _ in range(rng.randrange(1, 12))]
        message = request(prompt, temperature=0, max_tokens=rng.randrange(1, 6), ignore_eos=True)
        message.cache_salt = ("", "a", "b")[i % 3]
        messages.append(message)
    for start in range(0, count, at_once):
        await asyncio.gather(*(generate(stub, m) for m in messages[start : start + at_once]))


async def _read(stream, consumer: Consumer, until) -> None:
    """Apply batches until `until(consumer)` holds (10 s at most)."""
    async with asyncio.timeout(10):
        while not until(consumer):
            consumer.apply(await stream.read())


def _pool_of(service):
    return service.loaded.engine.scheduler.pool


@pytest.mark.parametrize("core", ["thread", "process"])
async def test_a_late_subscriber_holds_exactly_the_prefix_table(tiny_model, core):
    model = tiny_model if core == "thread" else None
    flags = ("--block-size", "4", "--num-kv-blocks", "48", "--kv-events", "--engine-core", core)
    async with engine_stub(model, *flags) as (stub, service):
        control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
        await _traffic(stub, 400, seed=1, at_once=16)  # a router joining after 400 requests (48 blocks: evictions)
        late = Consumer()
        stream = control.SubscribeKvEvents(kv_events_pb2.SubscribeKvEventsRequest())
        first = await stream.read()
        assert first.snapshot and first.events[0].WhichOneof("event") == "all_blocks_cleared"
        late.apply(first)
        await _traffic(stub, 30, seed=2)
        await asyncio.sleep(0.3)  # the last batches reach this server (from the core: over its pipe)
        hub = await service.loaded.engine.kv_hub()
        await _read(stream, late, lambda c: c.sequence == hub.next_sequence - 1)
        stream.cancel()
        mirror = hub.table()
        # the pool itself where it is in this process; else its size, from the core's load figures
        pool = set(_pool_of(service).table) if core == "thread" else None
        load = await stub.GetLoad(engine_pb2.GetLoadRequest())
    assert late.table == mirror and len(mirror) == load.kv_blocks_cached > 0
    assert pool is None or set(late.table) == pool
    for h, (parent, tokens, salt) in late.table.items():
        assert prefix_hash.block_hash(parent or prefix_hash.root(salt), tokens) == h


async def test_resume_continues_without_a_snapshot_and_a_reset_clears(tiny_model):
    flags = ("--block-size", "4", "--num-kv-blocks", "64", "--kv-events")
    async with engine_stub(tiny_model, *flags) as (stub, service):
        control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
        consumer = Consumer()
        stream = control.SubscribeKvEvents(kv_events_pb2.SubscribeKvEventsRequest())
        consumer.apply(await stream.read())
        await _traffic(stub, 5, seed=3)
        await _read(stream, consumer, lambda c: set(c.table) == set(_pool_of(service).table))
        stream.cancel()
        await _traffic(stub, 10, seed=4)  # missed while away
        resumed = control.SubscribeKvEvents(
            kv_events_pb2.SubscribeKvEventsRequest(resume_from=consumer.sequence + 1, instance_id=consumer.instance)
        )
        first = await resumed.read()
        assert not first.snapshot and first.sequence == consumer.sequence + 1
        consumer.apply(first)
        await _read(resumed, consumer, lambda c: set(c.table) == set(_pool_of(service).table))
        await control.ResetPrefixCache(control_pb2.ResetPrefixCacheRequest())
        cleared = await resumed.read()
        resumed.cancel()
        # another instance's number (a restarted engine): a snapshot
        other = control.SubscribeKvEvents(kv_events_pb2.SubscribeKvEventsRequest(resume_from=1, instance_id="gone"))
        assert (await other.read()).snapshot
        other.cancel()
    assert [e.WhichOneof("event") for e in cleared.events] == ["all_blocks_cleared"]


async def test_an_engine_without_kv_events_refuses_subscribers(tiny_model):
    async with engine_stub(tiny_model) as (stub, _):
        control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await control.SubscribeKvEvents(kv_events_pb2.SubscribeKvEventsRequest()).read()
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_smgs_stream_starts_with_a_snapshot_then_live_batches_with_loads(tiny_model):
    from smg_grpc_proto.generated import common_pb2 as smg
    from smg_grpc_proto.generated import vllm_engine_pb2_grpc

    from engine_svc.serving.vllm_grpc.kv_events import block_hash

    flags = ("--block-size", "4", "--num-kv-blocks", "48", "--kv-events")
    async with engine_stub(tiny_model, *flags) as (stub, service):
        await _traffic(stub, 20, seed=7)
        face = vllm_engine_pb2_grpc.VllmEngineStub(stub.channel)
        stream = face.SubscribeKvEvents(smg.SubscribeKvEventsRequest())
        async with asyncio.timeout(2):  # SMG waits 2 s for the first message
            first = await stream.read()
        table: dict[int, tuple] = {}

        def apply(batch) -> None:
            for e in batch.events:
                kind = e.WhichOneof("data")
                if kind == "cleared":
                    table.clear()
                elif kind == "removed":
                    for h in e.removed.block_hashes:
                        table.pop(h)
                else:
                    for b in e.stored.blocks:
                        table[b.block_hash] = tuple(b.token_ids)

        assert first.snapshot.count == 1 and first.events[0].WhichOneof("data") == "cleared"
        assert first.load.max_running_requests > 0
        apply(first)
        await _traffic(stub, 20, seed=8)
        await asyncio.sleep(0.3)
        last = (await service.loaded.engine.kv_hub()).next_sequence - 1
        sequence = first.sequence_number
        async with asyncio.timeout(10):
            while sequence < last:
                batch = await stream.read()
                if not batch.load.load_only:
                    assert batch.sequence_number == sequence + 1
                    sequence = batch.sequence_number
                    apply(batch)
        heartbeat = await stream.read()  # idle: a load record, no events
        stream.cancel()
        pool = _pool_of(service)
    assert heartbeat.load.load_only and not heartbeat.events and heartbeat.sequence_number == sequence
    assert set(table) == {block_hash(h) for h in pool.table}
