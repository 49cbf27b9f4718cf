"""What the step loop hands to the asyncio side: per-step outputs, and per-request outboxes and state.

Shared by the in-thread engine (engine.py) and the engine core process's proxy (core_process.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from engine_svc.model.sampler import RowLogprobs
from engine_svc.scheduling.kv_handoffs import Kept
from engine_svc.scheduling.sequence import Sequence
from scaleout.v1 import common_pb2
from scaleout_common.errors import ServiceError


@dataclass(slots=True)  # made and pickled per token: slots keep that cheap
class ChoiceDelta:
    index: int
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[RowLogprobs] = field(default_factory=list)
    finish_reason: common_pb2.FinishReason = common_pb2.FINISH_REASON_UNSPECIFIED
    stop: int | str | None = None  # the caller's stop that ended the choice: a stop token id or a stop string
    speculation: tuple | None = None  # with the finish, per request when asked: Speculator.report


@dataclass(slots=True)
class StepOutput:
    deltas: list[ChoiceDelta] = field(default_factory=list)
    prompt_logprobs: list[RowLogprobs] | None = None
    prompt_token_id_logprobs: list[list[float]] | None = None  # per scored prompt row, its named ids' values
    error: ServiceError | None = None
    cached_tokens: int | None = None  # with the first token: prompt tokens served from the prefix cache
    weight_version: str = ""  # the weights its tokens were sampled under (Controls.version)
    kv_handoff: Kept | None = None  # a prefill step's last output: its prompt's blocks, kept for a decode engine


@dataclass(slots=True)
class Ready:
    """What a stream sends next: the choices due by the stream interval, and what rides with them."""

    deltas: list[ChoiceDelta]
    prompt_logprobs: list[RowLogprobs] | None = None
    prompt_token_id_logprobs: list[list[float]] | None = None
    cached_tokens: int | None = None
    error: ServiceError | None = None
    kv_handoff: Kept | None = None
    weight_version: str = ""


class Outbox:
    """A request's outputs on their way to the client, merged per choice; the one owner of the stream interval.

    The step side `put`s each step's output (on the event loop; cheaper than an asyncio.Queue per token). A
    choice is due once it holds `interval` tokens or has finished (unary calls use an interval no choice
    reaches: they are due at the end); an error or prompt logprobs are due at once. The consumer is woken
    only when something is due, and `take` hands over exactly that, so tokens that queued up while the
    client was slow leave as one message. Tokens of two weight versions never share a message: a new version's
    first tokens make everything pending due first.
    """

    def __init__(self) -> None:
        self.interval = 1
        self.pending: dict[int, ChoiceDelta] = {}
        self.extras = Ready([])
        self.waiter: asyncio.Future | None = None
        self.version = ""  # the weight version of the pending tokens
        self.sealed: list[Ready] = []  # a version's last tokens, due before the next version's

    def _due(self, delta: ChoiceDelta) -> bool:
        return bool(delta.finish_reason) or len(delta.token_ids) >= self.interval

    def put(self, item: StepOutput) -> None:
        due = item.error is not None or bool(item.prompt_logprobs or item.prompt_token_id_logprobs)
        if item.deltas and item.weight_version != self.version:
            if self.pending:
                self.sealed.append(self._hand([self.pending.pop(i) for i in sorted(self.pending)]))
                due = True
            self.version = item.weight_version
        for delta in item.deltas:
            held = self.pending.get(delta.index)
            if held is None:
                self.pending[delta.index] = held = delta  # the step side hands each delta over once: reuse it
            else:
                held.token_ids += delta.token_ids
                held.logprobs += delta.logprobs
                held.finish_reason, held.stop, held.speculation = delta.finish_reason, delta.stop, delta.speculation
            due = due or self._due(held)
        extras = self.extras
        extras.error = extras.error or item.error
        extras.prompt_logprobs = item.prompt_logprobs or extras.prompt_logprobs
        extras.prompt_token_id_logprobs = item.prompt_token_id_logprobs or extras.prompt_token_id_logprobs
        if item.cached_tokens is not None:
            extras.cached_tokens = item.cached_tokens
        if item.kv_handoff is not None:
            extras.kv_handoff = item.kv_handoff
        if due and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _take_due(self) -> Ready | None:
        if self.sealed:
            return self.sealed.pop(0)
        extras = self.extras
        deltas = [self.pending.pop(i) for i in sorted(self.pending) if self._due(self.pending[i])]
        if not deltas and extras.error is None and not (extras.prompt_logprobs or extras.prompt_token_id_logprobs):
            return None
        return self._hand(deltas)

    def _hand(self, deltas: list[ChoiceDelta]) -> Ready:
        """`deltas` with what rides with them (of the pending tokens' version)."""
        extras = self.extras
        self.extras = Ready([], cached_tokens=extras.cached_tokens)
        extras.deltas, extras.weight_version = deltas, self.version
        return extras

    async def take(self) -> Ready:
        """What is due, once something is (at once, if it already is)."""
        while (ready := self._take_due()) is None:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        return ready


@dataclass(frozen=True)
class EndedRequest:
    """A request's figures as its call ends (finished, failed or cancelled), for the metrics."""

    n: int  # sequences (choices)
    max_tokens: int
    max_generated: int  # tokens of its longest choice
    preemptions: int
    prompt_tokens: int
    cached_tokens: int  # prompt tokens not computed here (prefix cache, or pulled from a prefill engine)


@dataclass(eq=False)
class RequestState:
    request_id: str
    seqs: list[Sequence]
    outbox: Outbox
    num_prompt_tokens: int
    prompt_logprobs: list[RowLogprobs] = field(default_factory=list)
    prompt_token_id_logprobs: list[list[float]] = field(default_factory=list)
    done: bool = False
    preempted: int = 0  # its sequences' preemptions, as an engine core in a process last reported them
    # perf_counter() stamps for tracing and metrics: submitted, first scheduled, first and latest token sampled.
    submitted_at: float = field(default_factory=time.perf_counter)
    scheduled_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None

    @property
    def preemptions(self) -> int:
        """Times its sequences were preempted: the core's report, or (the core in this process) theirs."""
        return self.preempted or sum(seq.num_preemptions for seq in self.seqs)

    def timings(self) -> dict[str, float]:
        """Seconds in the queue, in prefill and in decode (first to latest sampled token), and the first token's
        stamp (those known so far); telemetry's call summary measures TTFT from it."""
        if self.scheduled_at is None:
            return {}
        if self.first_token_at is None:
            return {"queue_s": self.scheduled_at - self.submitted_at}
        return {
            "queue_s": self.scheduled_at - self.submitted_at,
            "prefill_s": self.first_token_at - self.scheduled_at,
            "decode_s": (self.last_token_at or self.first_token_at) - self.first_token_at,
            "first_token_at": self.first_token_at,
        }
