"""The engine's GetLoad every LOAD_INTERVAL_S as Dynamo's per-worker snapshot (`ComponentSnapshot` into its
`SnapshotPublisher`): KV blocks used of all and the prefix cache's hit rate, what its router and its
`dynamo_component_*` series read. It runs on the worker's publishing thread (publishing.py), as Dynamo asks of a
snapshot's producer."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
from dynamo.common.backend.publisher import ComponentSnapshot

from engine_svc.faces.dynamo.hop import Metadata
from scaleout.v1 import engine_pb2, engine_pb2_grpc

log = logging.getLogger(__name__)
LOAD_INTERVAL_S = 1.0


async def relay_load(channel: grpc.aio.Channel, metadata: Metadata, snapshots: Any) -> None:
    stub = engine_pb2_grpc.EngineServiceStub(channel)
    while True:
        try:
            load = await stub.GetLoad(engine_pb2.GetLoadRequest(), timeout=5, metadata=metadata)
            snapshots.publish(0, snapshot(load))
        except grpc.aio.AioRpcError as e:
            log.warning("the engine's load: %s", e.code().name)
        await asyncio.sleep(LOAD_INTERVAL_S)


def usable_blocks(load: engine_pb2.GetLoadResponse) -> int:
    """The blocks sequences can hold (GetModelInfo's count has the pool's reserved one too)."""
    return load.kv_blocks_used + load.kv_blocks_free


def snapshot(load: engine_pb2.GetLoadResponse) -> ComponentSnapshot:
    total = usable_blocks(load)
    queried = load.prefix_cache_queried_tokens
    return ComponentSnapshot(
        kv_used_blocks=load.kv_blocks_used,
        kv_total_blocks=total,
        gpu_cache_usage=load.kv_blocks_used / total if total else 0.0,
        dp_rank=0,
        kv_cache_hit_rate=load.prefix_cache_hit_tokens / queried if queried else None,
    )
