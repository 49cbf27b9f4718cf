"""The thread the worker drives Dynamo's publishers from, off the loop that serves `generate`.

Dynamo asks for it: its `PushSource` hands over a `KvEventPublisher` that "the engine drives from its own thread"
and stops in `cleanup()`; `SnapshotPublisher.publish` is called "from the engine's stat-logger thread"
(dynamo/common/backend/publisher.py, engine.py). Dynamo's TRT-LLM worker does the same with its `ManagedThread`: a
private asyncio loop in an OS thread, so the publishers' polling never competes with request handling.

The thread runs its own asyncio loop with its own channel to the engine (a grpc.aio channel belongs to the loop
that opened it), over the same hop as the rest (hop.py: mTLS and identity). The relays (kv_relay.py, load_relay.py)
run as tasks there; `stop()` cancels them, closes the channel and joins the thread, so nothing publishes after
the worker's cleanup.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import grpc

from engine_svc.faces.dynamo import hop

Relay = Callable[[grpc.aio.Channel, hop.Metadata], Coroutine[Any, Any, None]]
JOIN_S = 5.0


class PublishingThread:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.channel: grpc.aio.Channel | None = None
        self.metadata: hop.Metadata = ()
        self.tasks: set[asyncio.Task] = set()
        self.lock = threading.Lock()
        self.stopped = False

    def submit(self, relay: Relay) -> None:
        """Run `relay(channel, metadata)` on the thread (started on the first call); from any thread."""
        with self.lock:
            if self.stopped:
                return
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
                self.thread = threading.Thread(target=self.loop.run_forever, name="dynamo-publishing", daemon=True)
                self.thread.start()
            self.loop.call_soon_threadsafe(self._create, relay)

    def _create(self, relay: Relay) -> None:
        if self.channel is None:
            self.channel, self.metadata = hop.open_hop(self.args)
        task = asyncio.get_running_loop().create_task(relay(self.channel, self.metadata))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def stop(self) -> None:
        """Cancel the relays, close the channel, end the thread (idempotent; from the worker's loop)."""
        with self.lock:
            self.stopped, loop, thread = True, self.loop, self.thread
        if loop is None or thread is None or not thread.is_alive():
            return
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._shutdown(), loop))
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, JOIN_S)
        loop.close()

    async def _shutdown(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.channel is not None:
            await self.channel.close()
        # grpc.aio's own per-call tasks end a step after their calls: let them, before the loop closes
        rest = asyncio.all_tasks() - {asyncio.current_task()}
        if rest:
            await asyncio.wait(rest, timeout=JOIN_S)
