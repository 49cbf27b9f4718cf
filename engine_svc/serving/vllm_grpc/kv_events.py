"""`VllmEngine.SubscribeKvEvents` (smg.grpc.common's KvEventBatch) over our KV-event hub (kv_relay.py).

Held against smg-grpc-proto 0.4.28's common.proto and SMG's own servicers and KV monitor (lightseekorg/smg:
grpc_servicer/smg_grpc_servicer/vllm/kv_events.py, model_gateway/src/core/kv_event_monitor.rs). Semantics:
`start_sequence_number` 0 (or a number this engine no longer buffers) starts with a snapshot of the whole cache:
chunks (KvSnapshotChunk) numbered consecutively up to the batch the state was taken at, the first starting with
a cleared event; a number it still buffers replays from that batch (SMG skips the one it already holds). Live
batches follow with the engine's own numbers (the ZMQ face's too). Every batch carries the engine's load; a
`load_only` batch (no events, the last number sent, or 0 before any with `load_records_before_first_batch`)
goes every HEARTBEAT_S while no batch does, so the first message comes within 2 s either way.

| smg.grpc.common                  | ours                                                                      |
|----------------------------------|---------------------------------------------------------------------------|
| KvBlock.block_hash (int64)       | the 16-byte prefix hash's low 64 bits, big-endian, as signed int64 (the   |
|                                  | reduction of vLLM's VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES); SMG re-derives  |
|                                  | a content hash from token_ids and uses this as a node identity only       |
| KvBlock.token_ids / block_size   | the block's tokens / the pool's block size                                |
| KvBlock.extra_keys               | [text=cache_salt] on a prompt's first block when salted (as vLLM's)      |
| KvBlocksStored.parent_block_hash | BlocksStored.parent (unset for a prompt's first block)                    |
| KvBlocksStored.cache_salt        | BlocksStored.cache_salt (unset when empty)                                |
| tier / medium / group_idx        | KV_CACHE_TIER_DEVICE / "GPU" / 0 (one pool, one group)                    |
| KvBlocksRemoved.block_hashes     | BlocksRemoved.hashes                                                      |
| KvCacheCleared                   | AllBlocksCleared (a reset, or batch 0 of a fresh engine)                  |
| KvCacheEvent.event_id            | counts the stream's live events from 1; 0 on a snapshot's                 |
| KvEventBatch.dp_rank             | 0                                                                         |
| EngineLoad                       | GetLoad: running, waiting, pending prefill tokens, KV use, tokens/s, ...  |
"""

from __future__ import annotations

import itertools
import time

from smg_grpc_proto.generated import common_pb2 as smg

from engine_svc.scheduling import kv_events as ours
from engine_svc.serving import kv_relay
from engine_svc.serving.kv_hub import KvBatch
from scaleout.v1 import engine_pb2
from scaleout_common.reasons import Reason, fail

HEARTBEAT_S = 1.0
SNAPSHOT_BLOCKS = 4096  # blocks per snapshot chunk: SMG's client takes messages of 4 MiB at most
MEDIUM = "GPU"
TIER = smg.KV_CACHE_TIER_DEVICE


def block_hash(h: bytes) -> int:
    value = int.from_bytes(h, "big") & 0xFFFF_FFFF_FFFF_FFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def engine_load(load: engine_pb2.GetLoadResponse, sample: int, load_only: bool) -> smg.EngineLoad:
    blocks = max(load.kv_blocks_used + load.kv_blocks_free, 1)
    record = smg.EngineLoad(
        running_requests=load.running,
        waiting_requests=load.waiting,
        waiting_uncached_tokens=load.pending_prefill_tokens,
        token_usage=load.kv_blocks_used / blocks,
        gen_throughput=load.generated_tokens_per_s,
        max_running_requests=load.max_running,
        sample=sample,
        load_only=load_only,
    )
    if load_only or sample == 1:  # the telemetry beyond the routing core: on the heartbeat cadence
        record.cache_hit_rate = load.prefix_cache_hit_tokens / max(load.prefix_cache_queried_tokens, 1)
        record.num_used_tokens = load.kv_blocks_used * load.kv_block_size
        record.max_total_num_tokens = blocks * load.kv_block_size
    return record


def event(e: ours.KvEvent, block_size: int, event_id: int) -> smg.KvCacheEvent:
    if isinstance(e, ours.BlocksStored):
        salted = e.parent is None and e.cache_salt
        blocks = [
            smg.KvBlock(
                block_hash=block_hash(h),
                token_ids=e.token_ids[i * block_size : (i + 1) * block_size],
                block_size=block_size,
                extra_keys=[smg.KvBlockExtraKey(text=e.cache_salt)] if salted and i == 0 else [],
            )
            for i, h in enumerate(e.hashes)
        ]
        stored = smg.KvBlocksStored(blocks=blocks, tier=TIER, medium=MEDIUM, group_idx=0)
        if e.parent is not None:
            stored.parent_block_hash = block_hash(e.parent)
        if e.cache_salt:
            stored.cache_salt = e.cache_salt
        return smg.KvCacheEvent(event_id=event_id, stored=stored)
    if isinstance(e, ours.BlocksRemoved):
        removed = smg.KvBlocksRemoved(
            block_hashes=[block_hash(h) for h in e.hashes], tier=TIER, medium=MEDIUM, group_idx=0
        )
        return smg.KvCacheEvent(event_id=event_id, removed=removed)
    return smg.KvCacheEvent(event_id=event_id, cleared=smg.KvCacheCleared())


def _snapshot(batch: KvBatch, block_size: int):
    """A snapshot as chunks of about SNAPSHOT_BLOCKS blocks (a run is split where a chunk fills), numbered
    consecutively up to batch.sequence (never below 0: then the last chunk takes the rest)."""
    chunks: list[list[ours.KvEvent]] = [[]]
    filled = blocks = 0
    for e in batch.events:
        if not isinstance(e, ours.BlocksStored):
            chunks[-1].append(e)
            continue
        for start in range(0, len(e.hashes), SNAPSHOT_BLOCKS):
            hashes = e.hashes[start : start + SNAPSHOT_BLOCKS]
            if filled + len(hashes) > SNAPSHOT_BLOCKS and filled and len(chunks) <= batch.sequence:
                chunks.append([])
                filled = 0
            parent = e.parent if start == 0 else e.hashes[start - 1]
            tokens = e.token_ids[start * block_size : (start + len(hashes)) * block_size]
            chunks[-1].append(ours.BlocksStored(hashes, parent, tokens, e.cache_salt, e.lora_id, e.lora_name))
            filled += len(hashes)
            blocks += len(hashes)
    for index, events in enumerate(chunks):
        chunk = smg.KvSnapshotChunk(index=index, count=len(chunks), blocks=blocks, unknown_before=0)
        yield batch.sequence - len(chunks) + 1 + index, [event(e, block_size, 0) for e in events], chunk


async def stream(engine, request):
    """SubscribeKvEvents' messages for `engine` (an EngineAPI)."""
    hub = await engine.kv_hub()
    if hub is None:  # UNIMPLEMENTED, as vLLM's servicer answers without a KV-event publisher
        raise fail(Reason.RPC_NOT_SERVED, "this engine publishes no KV events (start it with --kv-events)")
    start = request.start_sequence_number
    sub = kv_relay.subscription(hub, start or None, hub.instance_id)
    samples, event_ids = itertools.count(1), itertools.count(1)
    size = hub.block_size
    last = 0 if request.load_records_before_first_batch or not start else start - 1
    try:
        while True:
            batch = await sub.get(HEARTBEAT_S)
            if batch is None:
                load = engine_load(engine.load(), next(samples), True)
                yield smg.KvEventBatch(sequence_number=last, timestamp=time.time(), dp_rank=0, load=load)
                continue
            if batch.snapshot:
                for sequence, events, chunk in _snapshot(batch, size):
                    load = engine_load(engine.load(), next(samples), False)
                    yield smg.KvEventBatch(
                        sequence_number=sequence,
                        timestamp=batch.timestamp,
                        events=events,
                        dp_rank=0,
                        snapshot=chunk,
                        load=load,
                    )
            else:
                events = [event(e, size, next(event_ids)) for e in batch.events]
                load = engine_load(engine.load(), next(samples), False)
                yield smg.KvEventBatch(
                    sequence_number=batch.sequence, timestamp=batch.timestamp, events=events, dp_rank=0, load=load
                )
            last = batch.sequence
    finally:
        sub.close()
