"""Refusals before work starts: each has its status code and stable ErrorInfo reason."""

from __future__ import annotations

import grpc
import pytest

from scaleout.v1 import engine_pb2
from scaleout_common.errors import ServiceError
from tests.engine.conftest import TINY_VOCAB, engine_stub, request

BAD = [
    (request([]), grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_PROMPT"),
    (request([1, TINY_VOCAB]), grpc.StatusCode.INVALID_ARGUMENT, "TOKEN_ID_OUT_OF_VOCAB"),
    (request([1, -3]), grpc.StatusCode.INVALID_ARGUMENT, "TOKEN_ID_OUT_OF_VOCAB"),
    (request([1, 2], max_tokens=-1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING_PARAM"),
    (request([1, 2], n=0), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING_PARAM"),
    (request([1, 2], top_p=0.0), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING_PARAM"),
    (request([1, 2], temperature=-1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING_PARAM"),
    (request([1, 2], logprobs=1000), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING_PARAM"),
    (request([1, 2], logit_bias={99999: 1.0}), grpc.StatusCode.INVALID_ARGUMENT, "TOKEN_ID_OUT_OF_VOCAB"),
    (request([1, 2], temperature=float("nan")), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING_PARAM"),
    (request([1, 2], top_p=float("inf")), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING_PARAM"),
    (request([1, 2], logit_bias={5: float("nan")}), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING_PARAM"),
    (request([1, 2], min_tokens=9, max_tokens=4), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING_PARAM"),
    (request([1, 2], stream_interval=0), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING_PARAM"),
    (request([1] * 600), grpc.StatusCode.OUT_OF_RANGE, "PROMPT_TOO_LONG"),
    (request([1] * 500, max_tokens=100), grpc.StatusCode.OUT_OF_RANGE, "MAX_TOKENS_TOO_LARGE"),
]


def reason_of(error: grpc.RpcError) -> str:
    return ServiceError.from_rpc_error(error).reason


async def test_bad_requests_are_refused_with_their_reasons(tiny_model):
    async with engine_stub(tiny_model, fingerprint="sha256:mine") as (stub, _):
        for message, code, reason in BAD:
            for call in (lambda: stub.GenerateUnary(message), lambda: _drain(stub.Generate(message))):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await call()
                assert (caught.value.code(), reason_of(caught.value)) == (code, reason), message
        foreign = request([1, 2], max_tokens=2)
        foreign.tokenizer_fingerprint = "sha256:theirs"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GenerateUnary(foreign)
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert reason_of(caught.value) == "TOKENIZER_MISMATCH"
        foreign.tokenizer_fingerprint = "sha256:mine"
        assert (await stub.GenerateUnary(foreign)).finished
        info = await stub.GetModelInfo(engine_pb2.GetModelInfoRequest())
    assert (info.vocab_size, info.max_model_len, info.backend, info.device) == (TINY_VOCAB, 512, "paged", "cpu")
    assert info.tokenizer_fingerprint == "sha256:mine" and list(info.eos_token_ids) == [2]


async def test_full_waiting_queue_refuses_fast(tiny_model):
    async with engine_stub(tiny_model, "--max-num-seqs", "2", "--max-waiting", "1") as (stub, _):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GenerateUnary(request([1, 2], n=2, max_tokens=2))
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and reason_of(caught.value) == "QUEUE_FULL"


async def _drain(call):
    return [m async for m in call]
