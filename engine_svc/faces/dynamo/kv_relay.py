"""The engine's KV events to Dynamo's router over the worker's gRPC hop (hop.py: mTLS and identity), not ZMQ.

`EngineControlService.SubscribeKvEvents` starts with a snapshot of the engine's prefix table, so a worker started
after its engine learns the blocks already cached (Dynamo's `ZmqSource` reads live events only and cannot ask the
ZMQ face's replay socket); a stream lost after live batches resumes where it stopped, one lost in a snapshot asks
for a new one. It runs on the worker's publishing thread (publishing.py), as Dynamo's `PushSource` asks. Each
batch goes to Dynamo's `KvEventPublisher`:

| ours | Dynamo |
|---|---|
| BlocksStored | `publish_stored`: the run's tokens, the batch's block size per block, hashes, parent, cache salt |
| BlocksRemoved | `publish_removed` |
| AllBlocksCleared (a snapshot's first event, a cache reset) | `publish_removed` of every block this relay stored and did not see removed: the publisher has no clear |

Hashes are the low 64 bits of our 16-byte prefix hashes as a signed int, the type Dynamo takes; its router hashes
the blocks' token ids itself, these only name blocks for removal and parenthood.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc

from engine_svc.faces.dynamo.hop import Metadata
from scaleout.v1 import control_pb2_grpc, kv_events_pb2

log = logging.getLogger(__name__)
RETRY_S = 1.0
# Answers that no retry changes: the engine has no KV events (--kv-events), or the worker is not an admin.
FINAL = {grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.PERMISSION_DENIED}


def block_hash(ours: bytes) -> int:
    return int.from_bytes(ours[-8:], "big", signed=True)


class KvRelay:
    def __init__(self, channel: grpc.aio.Channel, metadata: Metadata):
        self.stub = control_pb2_grpc.EngineControlServiceStub(channel)
        self.metadata = metadata
        self.stored: set[int] = set()  # blocks published stored and not removed since

    async def run(self, publisher: Any) -> None:
        """Until cancelled, or the engine answers that it has no KV events for this worker."""
        resume: int | None = None  # the next live batch, once one arrived after the snapshot
        instance = ""
        while True:
            request = kv_events_pb2.SubscribeKvEventsRequest(instance_id=instance, resume_from=resume)
            try:
                async for batch in self.stub.SubscribeKvEvents(request, metadata=self.metadata):
                    self.relay(batch, publisher)
                    instance = batch.instance_id
                    resume = None if batch.snapshot else batch.sequence + 1
            except grpc.aio.AioRpcError as e:
                if e.code() in FINAL:
                    log.warning("no KV events from the engine, no KV-aware routing: %s", (e.details() or "")[:300])
                    return
                log.warning("the engine's KV events: %s; again in %s s", e.code().name, RETRY_S)
            await asyncio.sleep(RETRY_S)

    def relay(self, batch: kv_events_pb2.KvEventBatch, publisher: Any) -> None:
        for event in batch.events:
            kind = event.WhichOneof("event")
            if kind == "blocks_stored":
                run = event.blocks_stored
                hashes = [block_hash(h) for h in run.block_hashes]
                publisher.publish_stored(
                    list(run.token_ids),
                    [batch.block_size] * len(hashes),
                    hashes,
                    block_hash(run.parent_block_hash) if run.parent_block_hash else None,
                    lora_name=run.lora_name or None,
                    cache_salt=run.cache_salt or None,
                )
                self.stored.update(hashes)
            elif kind == "blocks_removed":
                hashes = [h for h in map(block_hash, event.blocks_removed.block_hashes) if h in self.stored]
                if hashes:
                    publisher.publish_removed(hashes)
                    self.stored.difference_update(hashes)
            elif kind == "all_blocks_cleared" and self.stored:
                publisher.publish_removed(list(self.stored))
                self.stored.clear()
