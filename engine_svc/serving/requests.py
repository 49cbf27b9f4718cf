"""What the step loop hands to the asyncio side: per-step outputs, and per-request outboxes and state.

Shared by the in-thread engine (engine.py) and the engine core process's proxy (core_process.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from engine_svc.model.sampler import RowLogprobs
from engine_svc.scheduling.sequence import Sequence
from scaleout.v1 import common_pb2
from scaleout_common.errors import ServiceError


@dataclass(slots=True)  # made and pickled per token: slots keep that cheap
class ChoiceDelta:
    index: int
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[RowLogprobs] = field(default_factory=list)
    finish_reason: common_pb2.FinishReason = common_pb2.FINISH_REASON_UNSPECIFIED
    stop_token_id: int | None = None


@dataclass(slots=True)
class StepOutput:
    deltas: list[ChoiceDelta] = field(default_factory=list)
    prompt_logprobs: list[RowLogprobs] | None = None
    error: ServiceError | None = None
    cached_tokens: int | None = None  # with the first token: prompt tokens served from the prefix cache


class Outbox:
    """A request's step outputs, appended on the event loop; cheaper than an asyncio.Queue per token.

    The consumer is woken only when it has something to send: `wake_tokens` new tokens (its stream
    interval; unary calls wait for the end), a finished choice, prompt logprobs or an error.
    """

    def __init__(self) -> None:
        self.items: list[StepOutput] = []
        self.waiter: asyncio.Future | None = None
        self.wake_tokens = 1
        self._tokens = 0

    def put(self, item: StepOutput) -> None:
        self.items.append(item)
        for delta in item.deltas:
            self._tokens += len(delta.token_ids)
            if delta.finish_reason:
                self._tokens += self.wake_tokens
        if item.error is not None or item.prompt_logprobs:
            self._tokens += self.wake_tokens
        if self._tokens >= self.wake_tokens and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def take(self) -> list[StepOutput]:
        """What arrived since the last take, once there is enough of it (or anything, if it is already there)."""
        while not self.items:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        items, self.items, self._tokens = self.items, [], 0
        return items


@dataclass(eq=False)
class RequestState:
    request_id: str
    seqs: list[Sequence]
    outbox: Outbox
    num_prompt_tokens: int
    prompt_logprobs: list[RowLogprobs] = field(default_factory=list)
    done: bool = False
    # perf_counter() stamps for tracing and metrics: submitted, first scheduled, first token sampled.
    submitted_at: float = field(default_factory=time.perf_counter)
    scheduled_at: float | None = None
    first_token_at: float | None = None

    def timings(self) -> dict[str, float]:
        """Seconds in the queue and in prefill, and the first token's stamp (those known so far); telemetry's
        call summary measures TTFT from it."""
        if self.scheduled_at is None:
            return {}
        if self.first_token_at is None:
            return {"queue_s": self.scheduled_at - self.submitted_at}
        return {
            "queue_s": self.scheduled_at - self.submitted_at,
            "prefill_s": self.first_token_at - self.scheduled_at,
            "first_token_at": self.first_token_at,
        }
