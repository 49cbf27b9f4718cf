"""KV blocks kept for a decode engine after a prefill (disaggregated serving), until pulled or expired.

The step thread keeps a finished prefill's prompt blocks (`keep`: one more hold on each, so neither the free list
nor the prefix cache's eviction hands them out) and frees them (`settle`, at every turn of the step loop) once
they were pulled or their time is up. The KV transfer service claims a handoff from its own thread (`claim`: from
then on it cannot expire while its blocks are read) and hands it back when done (`done`), which wakes the step
loop to free the blocks. A handoff's id is random (122 bits): it is the capability to read that prompt's K/V.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from engine_svc.scheduling.block_pool import BlockPool
from engine_svc.scheduling.sequence import Sequence

DEFAULT_TIMEOUT_S = 30.0


@dataclass
class Kept:
    handoff_id: str
    block_ids: list[int]
    token_ids: list[int]  # the prompt tokens whose K/V the blocks hold
    deadline: float  # time.monotonic() after which the blocks are freed unless claimed


class KvHandoffs:
    def __init__(self, pool: BlockPool, timeout_s: float = DEFAULT_TIMEOUT_S, wake: Callable[[], None] = lambda: None):
        self.pool = pool
        self.timeout_s = timeout_s
        self.wake = wake  # tells the step loop to settle (from any thread)
        self._lock = threading.Lock()
        self._kept: dict[str, Kept] = {}  # not claimed yet
        self._done: list[Kept] = []  # claimed and read: to free
        self.expired = 0  # handoffs freed unclaimed, since start
        self.released = 0  # handoffs claimed and handed back, since start

    @property
    def num_kept(self) -> int:
        return len(self._kept)

    def keep(self, seq: Sequence) -> Kept:
        """Step thread, before `seq` lets its blocks go: hold the blocks of its computed prompt tokens."""
        tokens = min(seq.num_computed, len(seq.prompt_ids))
        kept = Kept(
            uuid.uuid4().hex,
            seq.block_ids[: self.pool.blocks_for(tokens)],
            seq.prompt_ids[:tokens],
            time.monotonic() + self.timeout_s,
        )
        self.pool.pin(kept.block_ids)
        with self._lock:
            self._kept[kept.handoff_id] = kept
        return kept

    def peek(self, handoff_id: str) -> Kept | None:
        with self._lock:
            return self._kept.get(handoff_id)

    def claim(self, handoff_id: str) -> Kept | None:
        """Any thread: take the handoff for reading (None: freed already, or never made)."""
        with self._lock:
            return self._kept.pop(handoff_id, None)

    def done(self, kept: Kept) -> None:
        """Any thread: the claimed handoff's blocks were read (or the reader went away): free them."""
        with self._lock:
            self._done.append(kept)
            self.released += 1
        self.wake()

    def due(self, now: float) -> bool:
        """Whether `settle` has work now (the step loop's wait ends for it)."""
        with self._lock:
            return bool(self._done) or any(k.deadline <= now for k in self._kept.values())

    def next_wait(self, now: float) -> float | None:
        """Seconds until the next handoff expires (None: none kept)."""
        with self._lock:
            return max(0.0, min(k.deadline for k in self._kept.values()) - now) if self._kept else None

    def settle(self, now: float) -> None:
        """Step thread: free the blocks of the handoffs read and of those whose time is up."""
        with self._lock:
            expired = [k for k in self._kept.values() if k.deadline <= now]
            for kept in expired:
                del self._kept[kept.handoff_id]
            freed, self._done = self._done + expired, []
        self.expired += len(expired)
        for kept in freed:
            self.pool.unpin(kept.block_ids)
