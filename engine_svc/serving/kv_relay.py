"""KV events across the engine core's pipes, and the hub an API server's subscribers read.

The hub lives with the block pool (kv_hub.py). With the step loop in this process (engine.Engine) a subscriber
reads that hub. With an engine core process, the first subscriber on an API server asks the core (`subscribe`
below, the core's side of the "kv_subscribe" command): the core sends that server a snapshot and then every
batch (KV_BATCH messages, pickled: only servers that asked pay for them), which fill the server's copy of the
hub, so a snapshot or a resume on any API server is served there, with the core's batch numbers.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import AsyncIterator

from engine_svc.serving.kv_hub import KvBatch, KvHub
from scaleout_common.reasons import Reason, fail

KV_BATCH = b"K"  # the first byte of a batch message from the core (core_process.py's others: M, P, R)
QUEUE_BATCHES = 4096  # batches a subscriber may fall behind by before it is cut off (it then resumes)


def subscribe(hub: KvHub | None, send, reply: bytes) -> None:
    """The core's side: stream `hub`'s snapshot and batches to one API server (`send`, thread-safe), then
    `reply` (answered after the snapshot, so the server holds its copy when its call returns)."""
    if hub is not None:
        instance, size = hub.instance_id, hub.block_size
        hub.open(lambda batch: send(KV_BATCH + pickle.dumps((instance, size, batch), protocol=5)))
    send(reply)


def take(copy: KvHub | None, message: bytes) -> KvHub:
    """An API server's side: apply one KV_BATCH message to its copy of the core's hub (made by the first)."""
    instance, size, batch = pickle.loads(memoryview(message)[1:])
    if copy is None:
        copy = KvHub(size, instance_id=instance)
    copy.publish(batch)
    return copy


async def batches(hub: KvHub | None, resume_from: int | None, instance_id: str) -> AsyncIterator[KvBatch]:
    """A subscriber's batches from `hub`: a snapshot or the missed ones, then live ones, until it falls
    QUEUE_BATCHES behind (RESOURCE_EXHAUSTED: it resumes from the last it holds)."""
    if hub is None:
        raise fail(Reason.KV_EVENTS_OFF, "this engine publishes no KV events (start it with --kv-events)")
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[KvBatch | None] = asyncio.Queue()  # bounded below: a None after QUEUE_BATCHES ends it

    def put(batch: KvBatch) -> None:
        if queue.qsize() < QUEUE_BATCHES:
            queue.put_nowait(batch)
        elif queue.qsize() == QUEUE_BATCHES:
            hub.close(listener)
            queue.put_nowait(None)

    def listener(batch: KvBatch) -> None:
        loop.call_soon_threadsafe(put, batch)

    hub.open(listener, resume_from, instance_id)
    try:
        while (batch := await queue.get()) is not None:
            yield batch
        raise fail(Reason.KV_EVENTS_BEHIND, f"fell {QUEUE_BATCHES} batches behind; resume from the last one held")
    finally:
        hub.close(listener)
