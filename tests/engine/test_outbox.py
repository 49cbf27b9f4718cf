"""The Outbox alone decides what a stream sends and when: the stream interval, merging, and what rides along."""

from __future__ import annotations

import asyncio

from engine_svc.serving.requests import ChoiceDelta, Outbox, StepOutput
from scaleout.v1 import common_pb2
from scaleout_common.reasons import Reason, fail

STOP = common_pb2.FINISH_REASON_STOP


def _step(*deltas: ChoiceDelta, **extras) -> StepOutput:
    return StepOutput(list(deltas), **extras)


async def test_a_choice_is_due_at_the_interval_and_queued_tokens_merge():
    outbox = Outbox()
    outbox.interval = 3
    for token in (1, 2):
        outbox.put(_step(ChoiceDelta(0, [token]), ChoiceDelta(1, [token + 10])))
    assert outbox.waiter is None and outbox._take_due() is None  # 2 < 3 tokens each: nothing due yet
    outbox.put(_step(ChoiceDelta(0, [3])))
    ready = await asyncio.wait_for(outbox.take(), 1)
    assert [(d.index, d.token_ids) for d in ready.deltas] == [(0, [1, 2, 3])]
    outbox.put(_step(ChoiceDelta(1, [13], finish_reason=STOP, stop=13)))
    ready = await asyncio.wait_for(outbox.take(), 1)
    assert [(d.index, d.token_ids, d.stop) for d in ready.deltas] == [(1, [11, 12, 13], 13)]


async def test_the_consumer_sleeps_until_something_is_due():
    outbox = Outbox()
    outbox.interval = 2
    taking = asyncio.ensure_future(outbox.take())
    await asyncio.sleep(0)
    outbox.put(_step(ChoiceDelta(0, [1]), cached_tokens=16))
    await asyncio.sleep(0)
    assert not taking.done()
    outbox.put(_step(ChoiceDelta(0, [2])))
    ready = await asyncio.wait_for(taking, 1)
    assert ready.deltas[0].token_ids == [1, 2] and ready.cached_tokens == 16


async def test_errors_and_prompt_logprobs_are_due_at_once():
    outbox = Outbox()
    outbox.interval = 1 << 30  # unary: choices are due only when they finish
    outbox.put(_step(ChoiceDelta(0, [1]), prompt_logprobs=[object()]))  # type: ignore[list-item]
    ready = await asyncio.wait_for(outbox.take(), 1)
    assert ready.deltas == [] and ready.prompt_logprobs
    outbox.put(_step(error=fail(Reason.ENGINE_STEP_FAILED, "boom")))
    ready = await asyncio.wait_for(outbox.take(), 1)
    assert ready.error is not None and ready.error.reason == Reason.ENGINE_STEP_FAILED
