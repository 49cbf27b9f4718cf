"""EngineControlService: control operations on this engine replica, admin-scoped (scaleout_common.identity).

Over REST they reach every replica at once through the one-hop service (FleetService, pipeline_svc/fleet.py).
SubscribeKvEvents streams the prefix cache's events (kv_relay.py) in our contract (kv_events.proto).
"""

from __future__ import annotations

from dataclasses import asdict

from engine_svc.scheduling import kv_events
from engine_svc.serving import kv_relay
from engine_svc.serving.kv_hub import KvBatch
from engine_svc.serving.vllm_kv_events import config as vllm_kv_config
from scaleout.v1 import control_pb2, control_pb2_grpc, kv_events_pb2
from scaleout_common.identity import caller, require_trusted

SNAPSHOT_BLOCKS = 4096  # blocks per message of a snapshot (a full H200's table is ~10^5 blocks)


class EngineControlServicer(control_pb2_grpc.EngineControlServiceServicer):
    def __init__(self, service):
        self.service = service  # EngineService: its engine is there once loaded (the server refuses calls before)

    async def ResetPrefixCache(self, request, context):
        require_trusted(caller(context), "ResetPrefixCache")
        dropped = await self.service.loaded.engine.reset_prefix_cache()
        return control_pb2.ResetPrefixCacheResponse(blocks_dropped=dropped)

    async def GetKvEventSources(self, request, context):
        require_trusted(caller(context), "GetKvEventSources")
        config = vllm_kv_config.parse(self.service.args.kv_events_config)
        if not config.zmq:
            return kv_events_pb2.GetKvEventSourcesResponse()
        return kv_events_pb2.GetKvEventSourcesResponse(source=kv_events_pb2.KvEventSource(**asdict(config)))

    async def SubscribeKvEvents(self, request, context):
        require_trusted(caller(context), "SubscribeKvEvents")
        hub = await self.service.loaded.engine.kv_hub()
        resume = request.resume_from if request.HasField("resume_from") else None
        async for batch in kv_relay.batches(hub, resume, request.instance_id):
            for message in messages(batch, hub.instance_id, hub.block_size):
                yield message


def messages(batch: KvBatch, instance_id: str, block_size: int):
    """`batch` as KvEventBatch messages: one, or a snapshot's blocks SNAPSHOT_BLOCKS at a time (each message
    flagged snapshot, the first starting with AllBlocksCleared)."""

    def message(events: list[kv_events_pb2.KvEvent]) -> kv_events_pb2.KvEventBatch:
        return kv_events_pb2.KvEventBatch(
            sequence=batch.sequence,
            timestamp=batch.timestamp,
            instance_id=instance_id,
            block_size=block_size,
            snapshot=batch.snapshot,
            events=events,
        )

    events, blocks = [], 0
    for event in batch.events:
        events.append(to_proto(event))
        blocks += len(event.hashes) if isinstance(event, kv_events.BlocksStored) else 0
        if batch.snapshot and blocks >= SNAPSHOT_BLOCKS:
            yield message(events)
            events, blocks = [], 0
    if events or not batch.snapshot:
        yield message(events)


def to_proto(event: kv_events.KvEvent) -> kv_events_pb2.KvEvent:
    if isinstance(event, kv_events.BlocksStored):
        stored = kv_events_pb2.BlocksStored(
            block_hashes=event.hashes,
            parent_block_hash=event.parent or b"",
            token_ids=event.token_ids,
            cache_salt=event.cache_salt,
        )
        return kv_events_pb2.KvEvent(blocks_stored=stored)
    if isinstance(event, kv_events.BlocksRemoved):
        return kv_events_pb2.KvEvent(blocks_removed=kv_events_pb2.BlocksRemoved(block_hashes=event.hashes))
    return kv_events_pb2.KvEvent(all_blocks_cleared=kv_events_pb2.AllBlocksCleared())
