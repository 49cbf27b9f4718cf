"""The engine as the server sees it, wherever its step loop runs, and the request table both engines share.

`EngineAPI` is what the gRPC servicer, streaming and metrics call. `Engine` implements it with the step loop in
a thread of the server, `EngineProcess` as a proxy of a step loop in a child process. Both keep the live
requests in an `EngineFront` (registration under the waiting bound, which ids an abort reaches) and differ only
in how adds and aborts travel to the step loop.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Protocol

from engine_svc.scheduling.sequence import Sequence
from engine_svc.serving import queue_budget
from engine_svc.serving.kv_hub import KvHub
from engine_svc.serving.load_figures import StepTokens
from engine_svc.serving.requests import EndedRequest, Outbox, RequestState
from engine_svc.serving.tenancy import public_id
from engine_svc.structured.spec import Constraint
from scaleout.v1 import engine_pb2
from scaleout_common.errors import ServiceError, quote
from scaleout_common.reasons import Reason, fail


class RequestObserver(Protocol):
    """A view of this server's requests (the vllm: metrics), called on the event loop: cheap."""

    def refused(self, reason: str) -> None:
        """A request refused by a queue limit (Reason.QUEUE_FULL, QUEUE_WAIT_OVER_BUDGET)."""
        ...

    def ended(self, request: EndedRequest) -> None: ...


class EngineAPI(Protocol):
    max_waiting: int
    max_queue_wait_s: float  # the queue-wait budget the server's front checks (queue_budget.py; 0: none)
    requests: dict[str, RequestState]  # the live requests this server holds, by engine key (tenancy.py)
    observers: list[RequestObserver]
    step_tokens: StepTokens  # the engine's steps by the tokens each ran

    def sleep_state(self) -> tuple[bool, int]:
        """(asleep, its level) (controls.py)."""
        ...

    @property
    def weight_version(self) -> str:
        """The weights' version as last known here (controls.py)."""
        ...

    @property
    def num_running(self) -> int: ...

    @property
    def num_waiting(self) -> int: ...

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start stepping; outputs fill the requests' outboxes on `loop`."""
        ...

    def stop(self) -> None: ...

    def load(self) -> engine_pb2.GetLoadResponse:
        """What routers and metrics read."""
        ...

    async def compile_grammar(self, constraint: Constraint) -> None:
        """Compile a structured-output constraint where the step loop runs (or find it in the cache there),
        waiting at most the compile time bound; raises INVALID_GRAMMAR, GRAMMAR_TOO_COMPLEX or
        STRUCTURED_OUTPUTS_UNAVAILABLE."""
        ...

    def submit(self, request_id: str, seqs: list[Sequence], owner: str | None = None) -> RequestState:
        """Queue an admitted request (`owner`: the keyed client that sent it, None when trusted); refuses fast
        when the id is taken or the waiting queue is full."""
        ...

    def abort(self, request_ids: list[str]) -> tuple[list[str], list[str]]:
        """(the ids of live requests, now being aborted; the ids unknown or already finished)."""
        ...

    async def abort_elsewhere(self, request_ids: list[str], owner: str | None) -> list[str]:
        """Abort the requests other API servers of the same engine hold that an Abort naming `request_ids` for
        `owner` reaches (tenancy.abort_scope's, tenancy.reaches; None: a trusted caller); their engine keys."""
        ...

    async def reset_prefix_cache(self) -> int:
        """Empty the prefix cache where the step loop runs (BlockPool.reset_prefix_cache); the blocks dropped."""
        ...

    async def control(self, op: str, *args):
        """Run a control op (engine_svc/serving/controls.py: pause, sleep, weight transfer, ...) where the step loop
        runs, at its next turn; its answer (or its refusal, raised)."""
        ...

    async def kv_hub(self) -> KvHub | None:
        """The KV-event hub this process's subscribers read (kv_relay.py); None: the engine publishes none."""
        ...

    def healthy(self) -> bool:
        """False when work is pending and the step loop has stopped making progress."""
        ...


class EngineFront(ABC):
    """The live requests of an engine by id, on the server's side of it."""

    def __init__(self, max_waiting: int) -> None:
        self.max_waiting = max_waiting
        # The queue-wait budget (queue_budget.py); the server sets it on its own front (0: none, as in the core,
        # whose API server already checked).
        self.max_queue_wait_s = 0.0
        self.leaving = queue_budget.Leaving()  # the requests aborted here that the step loop still counts
        self.requests: dict[str, RequestState] = {}
        self.observers: list[RequestObserver] = []

    @property
    def num_waiting(self) -> int:
        """Sequences waiting, less those of requests aborted here that the step loop still counts."""
        return max(0, self.queued() - self.leaving.figures()[1])

    def backlog(self) -> queue_budget.Backlog:
        """What the queue-wait estimate reads (queue_budget.py), less the requests leaving."""
        return self._backlog().less(*self.leaving.figures())

    @abstractmethod
    def queued(self) -> int:
        """Sequences waiting as the step loop counts them (an engine core reports this: its API servers take
        their own aborts off it)."""

    @abstractmethod
    def _backlog(self) -> queue_budget.Backlog:
        """The queue-wait estimate's figures, as the step loop counts them."""

    @abstractmethod
    def _send_abort(self, request_ids: list[str]) -> None:
        """Tell the step loop to abort these live requests."""

    def abort(self, request_ids: list[str]) -> tuple[list[str], list[str]]:
        known = [rid for rid in request_ids if rid in self.requests and not self.requests[rid].done]
        if known:
            self._send_abort(known)
            self.leaving.add(self.requests[rid] for rid in known)
        return known, [rid for rid in request_ids if rid not in known]

    async def abort_elsewhere(self, request_ids: list[str], owner: str | None) -> list[str]:
        return []  # this server is the engine's only one

    def _register(self, request_id: str, seqs: list[Sequence]) -> RequestState:
        """The state of an admitted request, now live; refused when the id is taken, the queue is full or its
        estimated wait is over the budget."""
        if request_id in self.requests:
            raise fail(Reason.DUPLICATE_REQUEST_ID, f"request {quote(public_id(request_id))} is already running")
        try:
            if self.num_waiting + len(seqs) > self.max_waiting:
                raise fail(
                    Reason.QUEUE_FULL,
                    f"{self.num_waiting} sequences are waiting (max {self.max_waiting})",
                )
            if self.max_queue_wait_s > 0:
                queue_budget.check(self.backlog(), len(seqs), self.max_queue_wait_s)
        except ServiceError as refusal:
            for observer in self.observers:
                observer.refused(refusal.reason)
            raise
        state = RequestState(request_id, seqs, Outbox(), len(seqs[0].prompt_ids))
        self.requests[request_id] = state
        return state
