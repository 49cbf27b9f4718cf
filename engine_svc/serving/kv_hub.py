"""The engine's KV events as numbered batches, with a replay buffer and a mirror of the prefix table.

One hub per block pool, in the process that owns it (the engine core process when there is one): the pool
tells it each change (`add`, on the step thread, engine_svc/scheduling/kv_events.py) and the step loop closes
a batch after every step (`flush`). Batch numbers count from 0 per engine instance (`instance_id`, new at every
start); batch 0 is AllBlocksCleared, so a fresh or restarted engine says it holds nothing.

Listeners get every batch in order, called under the hub's lock on the publishing thread, so they must only
hand it on (a queue, a pipe, `call_soon_threadsafe`). `open` gives a new listener, under the same lock, either
the buffered batches from a sequence number (resume) or a snapshot: the whole table as one batch that starts
with AllBlocksCleared and carries the number of the last batch it includes. Either way the listener then
holds exactly the table, and the live batches that follow continue it without a gap. The mirror (hash ->
parent, tokens, salt) is built from the batches themselves, so an API server's copy of the hub, fed the
core's batches over its pipe, serves snapshots and resumes just like the core's.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from engine_svc.scheduling.kv_events import AllBlocksCleared, BlocksRemoved, BlocksStored, KvEvent

BUFFER_STEPS = 10_000  # batches kept for resume (vLLM's default replay buffer)


@dataclass(slots=True)
class KvBatch:
    sequence: int  # the batch's number; a snapshot: the number of the last batch it includes
    timestamp: float  # seconds since the epoch
    events: list[KvEvent]
    snapshot: bool = False  # the whole table (starts with AllBlocksCleared), not a change


Listener = Callable[[KvBatch], object]


@dataclass(slots=True)
class _Block:
    parent: bytes | None
    tokens: tuple[int, ...]
    salt: str
    lora_id: int = 0
    lora_name: str = ""


@dataclass
class KvHub:
    block_size: int
    buffer_steps: int = BUFFER_STEPS
    instance_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    next_sequence: int = 0
    _pending: list[KvEvent] = field(default_factory=lambda: [AllBlocksCleared()])
    _buffer: deque[KvBatch] = field(init=False)
    _table: dict[bytes, _Block] = field(default_factory=dict)
    _listeners: list[Listener] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._buffer = deque(maxlen=self.buffer_steps)

    # ---- the block pool's side (step thread) --------------------------------------------------------

    def add(self, event: KvEvent) -> None:
        self._pending.append(event)

    def flush(self) -> None:
        """Close the batch of the changes since the last flush (nothing when there were none)."""
        if self._pending:
            events, self._pending = self._pending, []
            self.publish(KvBatch(self.next_sequence, time.time(), events))

    # ---- batches in -----------------------------------------------------------------------------------

    def publish(self, batch: KvBatch) -> None:
        """Apply a batch (a flush's, or the core's on an API server's copy) and hand it to the listeners. A
        snapshot (the core's answer to a copy's subscription) replaces the table and restarts the buffer."""
        with self._lock:
            self._apply(batch.events)
            if batch.snapshot:
                self._buffer.clear()
            else:
                self._buffer.append(batch)
            self.next_sequence = batch.sequence + 1
            for listener in self._listeners:
                listener(batch)

    def _apply(self, events: list[KvEvent]) -> None:
        table, size = self._table, self.block_size
        for event in events:
            if isinstance(event, BlocksStored):
                parent, tokens = event.parent, event.token_ids
                for i, h in enumerate(event.hashes):
                    block = tuple(tokens[i * size : (i + 1) * size])
                    table[h] = _Block(parent, block, event.cache_salt, event.lora_id, event.lora_name)
                    parent = h
            elif isinstance(event, BlocksRemoved):
                for h in event.hashes:
                    table.pop(h, None)
            else:
                table.clear()

    # ---- listeners ----------------------------------------------------------------------------------

    def listen(self, listener: Listener) -> None:
        """Hear every batch from now on (the ZMQ publisher, attached before batch 0)."""
        with self._lock:
            self._listeners.append(listener)

    def open(self, listener: Listener, resume_from: int | None = None, instance_id: str = "") -> None:
        """Start `listener` at `resume_from` (the next batch it wants, of `instance_id`) when the buffer still
        holds it, else with a snapshot; then every live batch."""
        with self._lock:
            first = self._buffer[0].sequence if self._buffer else self.next_sequence
            if (
                instance_id == self.instance_id
                and resume_from is not None
                and first <= resume_from <= self.next_sequence
            ):
                for batch in self._buffer:
                    if batch.sequence >= resume_from:
                        listener(batch)
            else:
                listener(self._snapshot())
            self._listeners.append(listener)

    def close(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _snapshot(self) -> KvBatch:
        """The table as AllBlocksCleared then BlocksStored runs (a block whose parent is the one before it joins
        that one's run), in the order the blocks entered."""
        events: list[KvEvent] = [AllBlocksCleared()]
        run: BlocksStored | None = None
        for h, block in self._table.items():
            if run is not None and block.parent == run.hashes[-1] and block.salt == run.cache_salt:
                run.hashes.append(h)
                run.token_ids.extend(block.tokens)
            else:
                run = BlocksStored([h], block.parent, list(block.tokens), block.salt, block.lora_id, block.lora_name)
                events.append(run)
        return KvBatch(self.next_sequence - 1, time.time(), events, snapshot=True)

    def table(self) -> dict[bytes, tuple[bytes | None, tuple[int, ...], str]]:
        """The mirror: hash -> (parent hash, tokens, salt) (tests compare it with the pool's table)."""
        with self._lock:
            return {h: (b.parent, b.tokens, b.salt) for h, b in self._table.items()}
