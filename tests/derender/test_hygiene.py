"""Numbers a caller reports to derender are checked: counts that would overflow usage, NaN and +inf logprobs."""

from __future__ import annotations

import math

import grpc
import pytest

from derender_svc.limits import Limits, check_context
from scaleout.v1 import common_pb2, derender_pb2, engine_pb2
from scaleout_common.errors import ServiceError
from tests.derender.calls import engine_messages

INT32_MAX = 2**31 - 1


async def _refused(call, code, reason):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == code
    assert ServiceError.from_rpc_error(caught.value).reason == reason


def _chat(stub, context, results):
    return stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=results))


@pytest.mark.parametrize("count", [INT32_MAX, -1])
async def test_prompt_token_counts_outside_the_range_are_refused(stub, count):
    context = derender_pb2.DerenderContext(id="chatcmpl-x", num_prompt_tokens=count)
    await _refused(_chat(stub, context, engine_messages([[42]])), grpc.StatusCode.OUT_OF_RANGE, "TOO_MANY_TOKENS")
    for field in ("prompt", "usage"):
        message = engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(index=0, token_ids=[42])])
        if field == "prompt":
            message.prompt.num_tokens = count
        else:
            message.usage.prompt_tokens, message.usage.completion_tokens = count, 1
        await _refused(
            _chat(stub, derender_pb2.DerenderContext(id="chatcmpl-x"), [message]),
            grpc.StatusCode.OUT_OF_RANGE,
            "TOO_MANY_TOKENS",
        )


async def test_the_largest_accepted_counts_do_not_overflow_usage(stub):
    context = derender_pb2.DerenderContext(id="chatcmpl-x", num_prompt_tokens=1 << 24)
    answer = await _chat(stub, context, engine_messages([[42]]))
    assert answer.usage.prompt_tokens == 1 << 24


@pytest.mark.parametrize("value", [math.nan, math.inf])
async def test_nan_and_positive_infinity_logprobs_are_refused(stub, value):
    for top in (False, True):
        logprobs = common_pb2.TokenLogprobs(logprobs=[-0.5])
        if top:
            logprobs.top.add(token_ids=[42], logprobs=[value])
        else:
            logprobs.logprobs[0] = value
        message = engine_pb2.GenerateResponse(
            choices=[engine_pb2.GenerateChoice(index=0, token_ids=[42], logprobs=logprobs)], finished=True
        )
        context = derender_pb2.DerenderContext(id="chatcmpl-x", top_logprobs=1)
        await _refused(_chat(stub, context, [message]), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_LOGPROB")


def test_max_top_logprobs_minus_one_is_the_whole_vocabulary():
    context = derender_pb2.DerenderContext(id="cmpl-x", top_logprobs=1000, prompt_logprobs=49152)
    check_context(context, True, Limits(max_top_logprobs=-1), "", vocab_size=49152)
    with pytest.raises(ServiceError) as refused:
        check_context(context, True, Limits(), "", vocab_size=49152)
    assert "at most 20" in str(refused.value)
