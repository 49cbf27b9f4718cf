"""The bad inputs of issue 18, through the real gateway: each is a 4xx with a reason, never a 5xx."""

from __future__ import annotations

import grpc
import pytest

from tests.gateway.rest import error_reason, post

USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "path,body,reason",
    [
        ("/v1/chat/completions/render", {"messages": USER, "temperature": "NaN"}, "INVALID_SAMPLING_PARAM"),
        ("/v1/chat/completions/render", {"messages": USER, "top_p": "-Infinity"}, "INVALID_SAMPLING_PARAM"),
        ("/v1/chat/completions/render", {"messages": USER, "logit_bias": {"1": "NaN"}}, "INVALID_SAMPLING_PARAM"),
        # The transcoder turns an object where a float belongs into corrupt protobuf: refused as such.
        ("/v1/chat/completions/render/typed", {"messages": USER, "logit_bias": {"1": {}}}, "INVALID_MESSAGE"),
        ("/v1/chat/completions/render", {"messages": USER, "logit_bias": {"1": {}}}, "INVALID_REQUEST"),
        (
            "/inference/v1/generate/typed",
            {"token_ids": [1], "sampling_params": {"logit_bias": {"1": {}}}},
            "INVALID_MESSAGE",
        ),
        (
            "/inference/v1/generate/typed",
            {"token_ids": [1], "sampling_params": {"temperature": "NaN"}},
            "INVALID_SAMPLING_PARAM",
        ),
        (
            "/inference/v1/generate/typed",
            {"token_ids": [1], "sampling_params": {"logit_bias": {"1": "Infinity"}}},
            "INVALID_SAMPLING_PARAM",
        ),
        ("/v1/chat/completions", {"messages": USER, "temperature": "NaN", "max_tokens": 2}, "INVALID_SAMPLING_PARAM"),
        (
            "/v1/chat/completions/derender/typed",
            {
                "context": {"num_prompt_tokens": 2**31 - 1},
                "results": [{"choices": [{"index": 0, "token_ids": [1]}]}],
            },
            "TOO_MANY_TOKENS",
        ),
        (
            "/v1/chat/completions/derender/typed",
            {
                "context": {},
                "results": [{"choices": [{"index": 0, "token_ids": [1], "logprobs": {"logprobs": ["NaN"]}}]}],
            },
            "INVALID_LOGPROB",
        ),
    ],
)
def test_bad_numbers_are_4xx_with_a_reason(stack, path, body, reason):
    answer = post(stack, path, body)
    assert 400 <= answer.status_code < 500, answer.text[:300]
    assert error_reason(answer) == reason


@pytest.mark.parametrize("depth", [32, 33, 64, 98, 200, 5000])
@pytest.mark.parametrize("path", ["/v1/chat/completions/render", "/v1/chat/completions", "/tokenize"])
def test_json_depth_bombs_are_never_5xx(stack, path, depth):
    """A deep value where the contract takes any JSON (`metadata`) is accepted or refused; either way no 5xx."""
    body = '{"messages":[{"role":"user","content":"hi"}],"metadata":' + '{"a":' * depth + "1" + "}" * depth + "}"
    assert post(stack, path, body).status_code < 500
    assert 400 <= post(stack, path, "[" * depth + "]" * depth).status_code < 500


@pytest.mark.parametrize(
    "method",
    [
        "/scaleout.v1.RenderService/RenderChat",
        "/scaleout.v1.EngineService/GenerateUnary",
        "/scaleout.v1.DerenderService/DerenderChat",
        "/scaleout.v1.ChatService/CreateChatCompletion",
    ],
)
def test_corrupt_grpc_bytes_are_invalid_argument_without_python_text(stack, method):
    with grpc.insecure_channel(stack.gateway) as channel:
        call = channel.unary_unary(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with pytest.raises(grpc.RpcError) as refused:
            call(b"\xff\xff\xff\xff\x0f garbage", timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "DecodeError" not in refused.value.details() and "<class" not in refused.value.details()
