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

from engine_svc.serving.kv_hub import KvBatch, KvHub, Listener
from scaleout_common.reasons import Reason, fail

KV_BATCH = b"K"  # the first byte of a batch message from the core (core_process.py's others: M, P, R)
QUEUE_BATCHES = 4096  # batches a subscriber may fall behind by before it is cut off (it then resumes)


def subscribe(hub: KvHub | None, send, reply: bytes) -> Listener | None:
    """The core's side: stream `hub`'s snapshot and batches to one API server (`send`, thread-safe), then
    `reply` (answered after the snapshot, so the server holds its copy when its call returns). Returns the
    listener, for `hub.close` when that server goes."""
    if hub is None:
        send(reply)
        return None
    instance, size = hub.instance_id, hub.block_size

    def listener(batch: KvBatch) -> None:
        send(KV_BATCH + pickle.dumps((instance, size, batch), protocol=5))

    hub.open(listener)
    send(reply)
    return listener


def take(copy: KvHub | None, message: bytes) -> KvHub:
    """An API server's side: apply one KV_BATCH message to its copy of the core's hub (made by the first)."""
    instance, size, batch = pickle.loads(memoryview(message)[1:])
    if copy is None:
        copy = KvHub(size, instance_id=instance)
    copy.publish(batch)
    return copy


class Subscription:
    """One subscriber's batches from a hub: a snapshot or the missed ones, then live ones. A subscriber that falls
    QUEUE_BATCHES behind is cut off (KV_EVENTS_BEHIND: it resumes from the last batch it holds)."""

    def __init__(self, hub: KvHub, resume_from: int | None, instance_id: str):
        self.hub = hub
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[KvBatch | None] = asyncio.Queue()  # bounded by _put: None after QUEUE_BATCHES
        hub.open(self._listen, resume_from, instance_id)

    def _listen(self, batch: KvBatch) -> None:  # on the publishing thread
        self._loop.call_soon_threadsafe(self._put, batch)

    def _put(self, batch: KvBatch) -> None:
        if self._queue.qsize() < QUEUE_BATCHES:
            self._queue.put_nowait(batch)
        elif self._queue.qsize() == QUEUE_BATCHES:
            self.hub.close(self._listen)
            self._queue.put_nowait(None)

    async def get(self, wait_s: float | None = None) -> KvBatch | None:
        """The next batch; None when `wait_s` seconds pass without one."""
        try:
            batch = await asyncio.wait_for(self._queue.get(), wait_s)
        except TimeoutError:
            return None
        if batch is None:
            raise fail(Reason.KV_EVENTS_BEHIND, f"fell {QUEUE_BATCHES} batches behind; resume from the last one held")
        return batch

    def close(self) -> None:
        self.hub.close(self._listen)


def subscription(hub: KvHub | None, resume_from: int | None, instance_id: str) -> Subscription:
    if hub is None:
        raise fail(Reason.KV_EVENTS_OFF, "this engine publishes no KV events (start it with --kv-events)")
    return Subscription(hub, resume_from, instance_id)


async def batches(hub: KvHub | None, resume_from: int | None, instance_id: str) -> AsyncIterator[KvBatch]:
    """A subscription's batches, until the caller stops reading (or it is cut off)."""
    sub = subscription(hub, resume_from, instance_id)
    try:
        while True:
            batch = await sub.get()
            assert batch is not None  # no timeout
            yield batch
    finally:
        sub.close()
