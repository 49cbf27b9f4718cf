"""Malformed requests to every RPC: INVALID_ARGUMENT over gRPC, 400 with a JSON reason over REST; never 500 or a hang."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import json_format
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from scaleout.v1 import (
    chat_pb2_grpc,
    derender_pb2,
    derender_pb2_grpc,
    engine_pb2,
    engine_pb2_grpc,
    render_pb2,
    render_pb2_grpc,
)
from tests.gateway.rest import error_reason, post

OUT_OF_VOCAB = 10_000_000
USER = [{"role": "user", "content": "hi"}]

# (REST path, gRPC stub class, method, request message class, malformed JSON body)
CASES = [
    (
        "/v1/chat/completions/render/typed",
        render_pb2_grpc.RenderServiceStub,
        "RenderChat",
        render_pb2.RenderChatRequest,
        {},
    ),
    (
        "/v1/chat/completions/render/typed",
        render_pb2_grpc.RenderServiceStub,
        "RenderChat",
        render_pb2.RenderChatRequest,
        {"messages": USER, "max_tokens": -1},
    ),
    (
        "/v1/chat/completions/render_batch",
        render_pb2_grpc.RenderServiceStub,
        "RenderChatBatch",
        render_pb2.RenderChatBatchRequest,
        {"requests": [{}]},
    ),
    (
        "/v1/chat/completions/render_bridge",
        render_pb2_grpc.RenderServiceStub,
        "BridgeChat",
        render_pb2.BridgeChatRequest,
        {"previous_prompt_token_ids": [OUT_OF_VOCAB], "request": {"messages": USER}},
    ),
    (
        "/v1/completions/render/typed",
        render_pb2_grpc.RenderServiceStub,
        "RenderCompletion",
        render_pb2.RenderCompletionRequest,
        {},
    ),
    (
        "/v1/completions/render/typed",
        render_pb2_grpc.RenderServiceStub,
        "RenderCompletion",
        render_pb2.RenderCompletionRequest,
        {"prompts": ["hi"], "max_tokens": -5},
    ),
    (
        "/tokenize",
        render_pb2_grpc.RenderServiceStub,
        "Tokenize",
        render_pb2.TokenizeRequest,
        {"messages": [{"role": "wiz ard", "content": "hi"}]},
    ),
    (
        "/detokenize",
        render_pb2_grpc.RenderServiceStub,
        "Detokenize",
        render_pb2.DetokenizeRequest,
        {"tokens": [OUT_OF_VOCAB]},
    ),
    (
        "/inference/v1/generate/typed",
        engine_pb2_grpc.EngineServiceStub,
        "GenerateUnary",
        engine_pb2.GenerateRequest,
        {},
    ),
    (
        "/inference/v1/generate/typed",
        engine_pb2_grpc.EngineServiceStub,
        "GenerateUnary",
        engine_pb2.GenerateRequest,
        {"token_ids": [1, 2], "sampling_params": {"max_tokens": -1}},
    ),
    (
        "/inference/v1/generate/typed",
        engine_pb2_grpc.EngineServiceStub,
        "GenerateUnary",
        engine_pb2.GenerateRequest,
        {"token_ids": [1, OUT_OF_VOCAB]},
    ),
    ("/inference/v1/generate/stream", engine_pb2_grpc.EngineServiceStub, "Generate", engine_pb2.GenerateRequest, {}),
    (
        "/inference/v1/generate/stream",
        engine_pb2_grpc.EngineServiceStub,
        "Generate",
        engine_pb2.GenerateRequest,
        {"token_ids": [1, OUT_OF_VOCAB]},
    ),
    (
        "/inference/v1/generate/stream",
        engine_pb2_grpc.EngineServiceStub,
        "Generate",
        engine_pb2.GenerateRequest,
        {"token_ids": [1, 2], "sampling_params": {"max_tokens": -1}},
    ),
    ("/inference/v1/abort_requests", engine_pb2_grpc.EngineServiceStub, "Abort", engine_pb2.AbortRequest, {}),
    (
        "/v1/chat/completions/derender/typed",
        derender_pb2_grpc.DerenderServiceStub,
        "DerenderChat",
        derender_pb2.DerenderChatRequest,
        {},
    ),
    (
        "/v1/completions/derender/typed",
        derender_pb2_grpc.DerenderServiceStub,
        "DerenderCompletion",
        derender_pb2.DerenderCompletionRequest,
        {},
    ),
    (
        "/v1/derender/chunk",
        derender_pb2_grpc.DerenderServiceStub,
        "DerenderChunk",
        derender_pb2.DerenderChunkRequest,
        {},
    ),
    ("/v1/chat/completions", chat_pb2_grpc.ChatServiceStub, "CreateChatCompletion", render_pb2.RenderChatRequest, {}),
    (
        "/v1/chat/completions/stream",
        chat_pb2_grpc.ChatServiceStub,
        "StreamChatCompletion",
        render_pb2.RenderChatRequest,
        {"messages": USER, "max_tokens": -1},
    ),
]
IDS = [f"{method}-{i}" for i, (_, _, method, _, _) in enumerate(CASES)]


@pytest.mark.parametrize("path,stub_class,method,message_class,body", CASES, ids=IDS)
def test_malformed_rest_request_is_a_400_with_a_reason(stack, path, stub_class, method, message_class, body):
    response = post(stack, path, body)
    assert response.status_code == 400, response.text
    assert error_reason(response)


@pytest.mark.parametrize("path,stub_class,method,message_class,body", CASES, ids=IDS)
def test_malformed_grpc_request_is_invalid_argument_with_a_reason(stack, path, stub_class, method, message_class, body):
    request = json_format.ParseDict(body, message_class())
    with grpc.insecure_channel(stack.gateway) as channel:
        call = getattr(stub_class(channel), method)
        with pytest.raises(grpc.RpcError) as raised:
            answer = call(request, timeout=30)
            if hasattr(answer, "__next__"):  # server-streaming: the status arrives while reading
                list(answer)
    error = raised.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    status = rpc_status.from_call(error)
    infos = [d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    assert infos, "no ErrorInfo detail"


def test_derender_stream_without_context_is_invalid_argument(stack):
    with grpc.insecure_channel(stack.gateway) as channel:
        stream = derender_pb2_grpc.DerenderServiceStub(channel).DerenderStream(
            iter([derender_pb2.DerenderStreamRequest(engine_output=engine_pb2.GenerateResponse())]), timeout=30
        )
        with pytest.raises(grpc.RpcError) as raised:
            list(stream)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("path", sorted({case[0] for case in CASES}))
def test_bad_json_is_a_400_with_a_json_reason(stack, path):
    response = post(stack, path, '{"messages": [')
    assert response.status_code == 400, response.text
    assert error_reason(response) == "INVALID_JSON"


def test_the_error_filter_runs_without_a_lua_error(stack):
    """Its headers object went out of scope once it had buffered the body: every REST error logged a Lua error."""
    response = post(stack, "/v1/chat/completions", {"model": "not-served", "messages": USER})
    assert response.status_code == 404 and response.headers["content-type"] == "application/json"
    assert error_reason(response) == "MODEL_NOT_FOUND"
    assert "[lua]" not in (stack.config.log_dir / "envoy.log").read_text()
