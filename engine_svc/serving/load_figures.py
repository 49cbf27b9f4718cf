"""The load figures the engine computes for routers beside its counts (GetLoadResponse): how fast it generates,
and how busy it is.

`TokenRate` counts sampled tokens in half-second buckets on the step thread and reads tokens per second over
the last WINDOW_S from any thread: a few buckets summed per read, one addition per step. `utilization` is the
busier of the batch and the KV cache.
"""

from __future__ import annotations

import time
from collections import deque

WINDOW_S = 5.0
BUCKET_S = 0.5


class TokenRate:
    def __init__(self) -> None:
        self._buckets: deque[list[float]] = deque()  # [bucket start (perf_counter), tokens], oldest first

    def add(self, tokens: int, now: float) -> None:
        """Count `tokens` sampled at `now` (time.perf_counter). Step thread only."""
        buckets = self._buckets
        if buckets and now - buckets[-1][0] < BUCKET_S:
            buckets[-1][1] += tokens
            return
        buckets.append([now, tokens])
        while now - buckets[0][0] > WINDOW_S + BUCKET_S:
            buckets.popleft()

    def per_second(self, now: float | None = None) -> float:
        """Tokens per second over the last WINDOW_S (any thread: the copy is one C call under the GIL)."""
        now = time.perf_counter() if now is None else now
        return sum(tokens for start, tokens in list(self._buckets) if now - start < WINDOW_S) / WINDOW_S


def utilization(running: int, max_running: int, blocks_used: int, blocks_free: int) -> float:
    """The busier of the batch (running / max_running) and the KV cache (blocks held / all blocks), 0 to 1."""
    return max(running / max(max_running, 1), blocks_used / max(blocks_used + blocks_free, 1))
