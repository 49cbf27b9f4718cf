"""The queue-wait estimate and its refusal (engine_svc/serving/queue_budget.py): fast, no model."""

from __future__ import annotations

import grpc
import pytest

from engine_svc.serving.queue_budget import Backlog, Leaving, Pace, check
from engine_svc.serving.requests import Outbox, RequestState
from scaleout_common.errors import ServiceError


def backlog(**figures) -> Backlog:
    base = dict(
        running=4,
        max_running=4,
        waiting=0,
        pending_prefill_tokens=0,
        steps_left=(10, 500, 900, 3000),
        decode_step_s=0.05,
        prefill_token_s=0.0,
    )
    return Backlog(**{**base, **figures})


def test_a_free_slot_and_no_prefill_queued_is_no_wait():
    assert backlog(running=3).wait_s(1) == 0


def test_a_full_batch_waits_for_the_running_sequence_that_frees_its_slot():
    assert backlog().wait_s(1) == pytest.approx(10 * 0.05)  # the first to end
    assert backlog(waiting=2).wait_s(1) == pytest.approx(900 * 0.05)  # two are queued ahead: the third
    assert backlog(waiting=9).wait_s(1) == pytest.approx(3000 * 0.05)  # past the figures: the largest known


def test_queued_prefill_counts_but_the_requests_own_prompt_does_not():
    assert backlog(running=0, pending_prefill_tokens=2000, prefill_token_s=0.001).wait_s(1) == pytest.approx(2.0)


def test_no_measured_pace_never_refuses():
    check(backlog(waiting=9, decode_step_s=0.0), 1, budget_s=0.001)


def test_over_budget_is_resource_exhausted_with_retry_after():
    with pytest.raises(ServiceError) as refused:
        check(backlog(waiting=2), 1, budget_s=10)  # 45 s
    error = refused.value
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED and error.reason == "QUEUE_WAIT_OVER_BUDGET"
    assert error.metadata["retry_after_s"] == "35"
    assert ("retry-after", "35") in error.to_rpc_status().trailing_metadata
    check(backlog(waiting=2), 1, budget_s=0)  # no budget


def test_pace_splits_mixed_steps_into_decode_and_prefill():
    pace = Pace()
    pace.add(0.04, 1, 0)
    pace.add(1.04, 1, 1000)
    assert pace.decode_step_s == pytest.approx(0.04) and pace.prefill_token_s == pytest.approx(0.001)


def test_leaving_requests_come_off_until_done_and_never_below_zero():
    scheduled = RequestState("a", [object(), object()], Outbox(), 7, scheduled_at=1.0)  # type: ignore[list-item]
    queued = RequestState("b", [object()], Outbox(), 5)  # type: ignore[list-item]
    leaving = Leaving()
    leaving.add([scheduled, queued])
    assert leaving.figures() == (2, 1, 5)
    assert backlog(running=1, waiting=3, pending_prefill_tokens=4).less(*leaving.figures()) == backlog(
        running=0, waiting=2, pending_prefill_tokens=0
    )
    queued.done = True  # the step loop's figures let it go: so does the estimate
    assert leaving.figures() == (2, 0, 0)
