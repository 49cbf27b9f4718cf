"""vLLM's ZMQ KV-event publisher, on a thread of its own in the process that owns the block pool.

As vLLM's ZmqEventPublisher: a PUB socket sends each batch as three frames (topic, the batch's number as 8
bytes big-endian, the msgpack payload); an optional ROUTER socket answers a request `(identity, b"", start as 8
bytes big-endian)` with every buffered batch from `start` as `(identity, b"", topic, seq, payload)` and an end
marker `(identity, b"", b"", -1 as 8 bytes, b"")`. Endpoints with `*`, `::`, ipc:// or inproc:// are bound,
others connected (PUB only). Batch numbers are the hub's (kv_hub.py), so they count from 0 and agree with the
typed stream's. Encoding happens here, off the step thread: the step thread only queues the batch.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque

import msgspec
import zmq

from engine_svc.serving.kv_hub import KvBatch, KvHub
from engine_svc.serving.vllm_kv_events import wire
from engine_svc.serving.vllm_kv_events.config import KVEventsConfig

log = logging.getLogger(__name__)

END_SEQ = (-1).to_bytes(8, "big", signed=True)


def _is_bind(endpoint: str) -> bool:
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


class ZmqPublisher:
    def __init__(self, hub: KvHub, config: KVEventsConfig):
        self.block_size = hub.block_size
        self.int_hashes = wire.int_hashes()
        self.topic = config.topic.encode()
        self.queue: queue.Queue[KvBatch | None] = queue.Queue(maxsize=config.max_queue_size)
        self.buffer: deque[tuple[int, bytes]] = deque(maxlen=config.buffer_steps)
        ctx = zmq.Context.instance()
        self.pub = ctx.socket(zmq.PUB)
        self.pub.set_hwm(config.hwm)
        if _is_bind(config.endpoint):
            self.pub.bind(config.endpoint)
        else:
            self.pub.connect(config.endpoint)
        self.replay = None
        if config.replay_endpoint:
            self.replay = ctx.socket(zmq.ROUTER)
            self.replay.setsockopt(zmq.SNDHWM, 2 * (config.buffer_steps + 1))  # a full replay plus its marker
            self.replay.bind(config.replay_endpoint)
        self.thread = threading.Thread(target=self._run, name="kv-events-zmq", daemon=True)
        self.thread.start()
        hub.listen(self._take)

    def _take(self, batch: KvBatch) -> None:
        try:
            self.queue.put_nowait(batch)
        except queue.Full:  # the thread fell behind: drop (a subscriber sees the gap and replays)
            log.warning("kv events: ZMQ queue full, batch %d dropped", batch.sequence)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join(timeout=1.0)
        self.pub.close(linger=0)
        if self.replay is not None:
            self.replay.close(linger=0)

    def _run(self) -> None:
        encode = msgspec.msgpack.Encoder().encode
        while True:
            if self.replay is not None and self.replay.poll(0):
                self._serve_replay()
            try:
                batch = self.queue.get(timeout=0.05)
            except queue.Empty:
                continue
            if batch is None:
                return
            payload = encode(wire.batch(batch, self.block_size, self.int_hashes))
            seq = batch.sequence.to_bytes(8, "big")
            self.pub.send_multipart((self.topic, seq, payload))
            self.buffer.append((batch.sequence, payload))

    def _serve_replay(self) -> None:
        assert self.replay is not None
        frames = self.replay.recv_multipart()
        if len(frames) != 3:
            log.warning("kv events: replay request of %d frames ignored", len(frames))
            return
        client, _, start = frames
        first = int.from_bytes(start, "big")
        for seq, payload in list(self.buffer):
            if seq >= first:
                self.replay.send_multipart((client, b"", self.topic, seq.to_bytes(8, "big"), payload))
        self.replay.send_multipart((client, b"", b"", END_SEQ, b""))
