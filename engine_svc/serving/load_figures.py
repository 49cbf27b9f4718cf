"""The load figures the engine computes for routers beside its counts (GetLoadResponse): how fast it generates,
and how busy it is.

`TokenRate` counts sampled tokens in half-second buckets on the step thread and reads tokens per second over
the last WINDOW_S from any thread: a few buckets summed per read, one addition per step. `StepTokens` counts the
steps by the tokens each ran. `utilization` is the busier of the batch and the KV cache.
"""

from __future__ import annotations

import time
from bisect import bisect_left
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


# Bounds of the step sizes counted: powers of two up to a large token budget (vLLM's iteration_tokens buckets).
STEP_TOKEN_BOUNDS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


class StepTokens:
    """How many tokens each engine step ran (prompt tokens computed + tokens sampled): steps per bound of
    STEP_TOKEN_BOUNDS (the first bound >= the step's tokens; the last slot: beyond them) and their sum. Written by
    the step thread, read from any (a scrape may catch a count without its sum for an instant)."""

    def __init__(self) -> None:
        self.counts = [0] * (len(STEP_TOKEN_BOUNDS) + 1)
        self.total = 0

    def add(self, tokens: int) -> None:
        self.counts[bisect_left(STEP_TOKEN_BOUNDS, tokens)] += 1
        self.total += tokens

    def figures(self) -> tuple[int, ...]:
        """The counts, then the sum (what an engine core sends its API servers)."""
        return (*self.counts, self.total)

    def take(self, figures: tuple[int, ...]) -> None:
        self.counts[:], self.total = figures[:-1], figures[-1]


def utilization(running: int, max_running: int, blocks_used: int, blocks_free: int) -> float:
    """The busier of the batch (running / max_running) and the KV cache (blocks held / all blocks), 0 to 1."""
    return max(running / max(max_running, 1), blocks_used / max(blocks_used + blocks_free, 1))
