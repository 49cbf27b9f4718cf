"""The queue-wait budget: a request that would wait longer than `--max-queue-wait-s` on this engine before its
first token is refused at once, before any work, with RESOURCE_EXHAUSTED `QUEUE_WAIT_OVER_BUDGET`.

The gateway retries RESOURCE_EXHAUSTED on another replica (gateway/envoy.yaml.j2), so a request is not left
queued behind long work on one replica while another idles; the consistent hash's bounded load cannot see that
(it counts requests in flight, and a queued request weighs what a running stream does). With one replica, or
every replica over budget, the caller gets a fast 429 whose Retry-After is when the estimate falls within the
budget (scaleout_common/errors.py turns `retry_after_s` into the header).

The estimate (`Backlog.wait_s`) is the sum of
- the wait for a free slot: when running + waiting + the request's sequences exceed --max-num-seqs, the running
  sequence that frees the slot it needs can take its remaining max_tokens more decode steps (an upper bound:
  streams may stop earlier) at the measured seconds per decode step;
- the prefill queued ahead: the pending prefill tokens (GetLoad's `pending_prefill_tokens`) at the measured
  seconds per prefilled token. The request's own prompt is not queueing and never counts.
Speeds are measured per step while the engine works (`Pace`), not as throughput over a window
(`generated_tokens_per_s` falls with idle time and lags a burst, which would overstate the wait); until a step
was measured the estimate is 0: an engine is never refused for want of figures.

A request aborted on the server's side (a cancelled stream, an Abort) leaves the estimate and the waiting bound
at once (`Leaving`), not when the step loop takes it off its counts a step or a core message later: after a
mass cancellation that lag refused new requests for up to a second.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from scaleout_common.reasons import Reason, fail

if TYPE_CHECKING:
    from engine_svc.serving.requests import RequestState

DEFAULT_MAX_QUEUE_WAIT_S = 10.0
SLOT_FIGURES = 64  # the running sequences' smallest remaining step counts the core reports to the API servers
SMOOTHING = 0.2  # weight of the newest step in the moving averages


class Pace:
    """Seconds per decode step and per prefilled token, as moving averages over the steps (written by the step
    thread, read from any: two floats)."""

    def __init__(self) -> None:
        self.decode_step_s = 0.0
        self.prefill_token_s = 0.0

    def add(self, seconds: float, steps: int, prefill_tokens: int) -> None:
        """`steps` steps took `seconds`; `prefill_tokens` of their tokens were prefill (the rest decodes)."""
        if steps <= 0 or seconds <= 0:
            return
        if not prefill_tokens:
            self.decode_step_s = _blend(self.decode_step_s, seconds / steps)
            return
        # A mixed step: what a decode step would have taken is the decodes' share, the rest is the prefill's.
        prefill_s = max(seconds - self.decode_step_s * steps, seconds / 2)
        self.prefill_token_s = _blend(self.prefill_token_s, prefill_s / prefill_tokens)


def _blend(average: float, sample: float) -> float:
    return sample if average == 0 else average + SMOOTHING * (sample - average)


def steps_left(running) -> tuple[int, ...]:
    """The running sequences' decode steps left at most (their max_tokens less what they generated), smallest
    first, SLOT_FIGURES of them."""
    return tuple(heapq.nsmallest(SLOT_FIGURES, (s.config.max_tokens - len(s.output_ids) for s in running)))


@dataclass(frozen=True)
class Backlog:
    running: int
    max_running: int
    waiting: int  # sequences queued ahead (including those on their way to the step loop)
    pending_prefill_tokens: int
    steps_left: tuple[int, ...]  # steps_left() of the running sequences
    decode_step_s: float
    prefill_token_s: float

    def wait_s(self, new_seqs: int) -> float:
        """The estimated seconds before `new_seqs` more sequences all have a slot and their prefill starts."""
        slot_s = 0.0
        over = self.running + self.waiting + new_seqs - self.max_running  # slots that must free up first
        if over > 0 and self.steps_left:
            # Beyond the reported figures the largest known is a lower bound: never refuse on a guess.
            slot_s = self.steps_left[min(over, len(self.steps_left)) - 1] * self.decode_step_s
        return slot_s + self.pending_prefill_tokens * self.prefill_token_s

    def less(self, running: int, waiting: int, prefill_tokens: int) -> Backlog:
        """Without sequences the step loop still counts but that are leaving (never below 0)."""
        return replace(
            self,
            running=max(0, self.running - running),
            waiting=max(0, self.waiting - waiting),
            pending_prefill_tokens=max(0, self.pending_prefill_tokens - prefill_tokens),
        )


class Leaving:
    """The requests a server's front has aborted whose abort the step loop has not confirmed yet: the figures
    it reported still count them. Each stays until its state is done, which happens in the very message whose
    figures no longer count it (core_process.py) or as the step loop drops it (engine.py): it is left out
    once, never after the figures have let it go too."""

    def __init__(self) -> None:
        self._states: dict[str, RequestState] = {}

    def add(self, states: Iterable[RequestState]) -> None:
        self._states.update((state.request_id, state) for state in states)

    def figures(self) -> tuple[int, int, int]:
        """(running sequences, waiting sequences, the waiting ones' prompt tokens) of those still counted. A
        request counts running once the server has heard that it was scheduled."""
        running = waiting = prompt_tokens = 0
        for request_id, state in list(self._states.items()):
            if state.done:
                self._states.pop(request_id, None)  # a scrape thread may read the figures too
            elif state.scheduled_at is not None:
                running += len(state.seqs)
            else:
                waiting += len(state.seqs)
                prompt_tokens += len(state.seqs) * state.num_prompt_tokens
        return running, waiting, prompt_tokens


def check(backlog: Backlog, new_seqs: int, budget_s: float) -> None:
    """Refuse (RESOURCE_EXHAUSTED QUEUE_WAIT_OVER_BUDGET) when the request's estimated wait exceeds `budget_s`
    (0: no budget)."""
    if budget_s <= 0:
        return
    wait = backlog.wait_s(new_seqs)
    if wait > budget_s:
        raise fail(
            Reason.QUEUE_WAIT_OVER_BUDGET,
            f"this engine would queue the request for about {wait:.0f} s (budget {budget_s:g} s)",
            retry_after_s=str(max(1, math.ceil(wait - budget_s))),
        )


def add_flag(parser) -> None:
    parser.add_argument(
        "--max-queue-wait-s",
        type=float,
        default=DEFAULT_MAX_QUEUE_WAIT_S,
        help="refuse (RESOURCE_EXHAUSTED, retried on another replica by the gateway) a request whose estimated "
        "wait for a slot and the prefill queued ahead exceeds this (0: never)",
    )
