"""Failures no service typed reach clients with a reason of the table (real Envoy): the one-hop service passes
on Envoy's own UNAVAILABLE (no engine replica) as UPSTREAM_UNAVAILABLE, with Envoy's words and never its REST
JSON for a message, and the gateway's Lua filter names a bare DEADLINE_EXCEEDED status UPSTREAM_TIMEOUT."""

from __future__ import annotations

import grpc
import pytest
import requests
from google.protobuf.struct_pb2 import Value

from devstack.stack import Stack, StackConfig
from scaleout.v1 import chat_pb2_grpc, common_pb2, engine_pb2, engine_pb2_grpc, render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason
from tests.gateway.rest import error_reason

USER = [{"role": "user", "content": "hi"}]
# Envoy's reply to a gRPC call with no replica to take it (gateway/envoy.yaml.j2, local_reply_config).
NO_REPLICA = "no healthy upstream for /scaleout.v1.{method} (GATEWAY_UH)"
HOPS = ("EngineService/Generate", "EngineService/GenerateUnary", "DerenderService/DerenderStream")


@pytest.fixture(scope="module")
def no_engine(tmp_path_factory):
    """Render and the one-hop service, and no engine replica behind the gateway."""
    config = StackConfig(
        port=0,
        replicas={"render": 1, "engine": 0, "derender": 0, "chat": 1},
        log_dir=tmp_path_factory.mktemp("no-engine-logs"),
    )
    with Stack(config) as stack:
        yield stack


def _post(stack, path, body, headers=None) -> requests.Response:
    return requests.post(stack.rest_url + path, json=body, headers=headers, timeout=60)


def test_no_engine_replica_is_upstream_unavailable_on_every_one_hop_route(no_engine):
    chat = _post(no_engine, "/v1/chat/completions", {"messages": USER, "max_tokens": 2})
    assert chat.status_code == 503, chat.text
    assert chat.json()["error"]["type"] == "server_error"
    assert error_reason(chat) == Reason.UPSTREAM_UNAVAILABLE
    for path, body in (  # vLLM's routes over the chat path (pipeline_svc/faces/vllm_server.py)
        ("/v1/chat/completions/batch", {"messages": [USER, USER], "max_tokens": 2}),
        ("/invocations", {"messages": USER, "max_tokens": 2}),
    ):
        answer = _post(no_engine, path, body)
        assert answer.status_code == 503 and error_reason(answer) == Reason.UPSTREAM_UNAVAILABLE, answer.text

    messages = _post(no_engine, "/v1/messages", {"model": "SmolLM2-135M-Instruct", "messages": USER, "max_tokens": 2})
    assert messages.status_code == 503, messages.text
    assert messages.json()["error"]["type"] == "overloaded_error"
    assert messages.json()["error"]["code"] == Reason.UPSTREAM_UNAVAILABLE

    request = render_pb2.RenderChatRequest(
        messages=[common_pb2.ChatMessage(role="user", content=Value(string_value="hi"))]
    )
    with grpc.insecure_channel(no_engine.gateway) as channel, pytest.raises(grpc.RpcError) as refused:
        chat_pb2_grpc.ChatServiceStub(channel).CreateChatCompletion(request, timeout=30)
    failure = ServiceError.from_rpc_error(refused.value)
    assert (failure.code, failure.reason, failure.typed) == (
        grpc.StatusCode.UNAVAILABLE,
        Reason.UPSTREAM_UNAVAILABLE,
        True,
    )
    assert failure.message in {NO_REPLICA.format(method=hop) for hop in HOPS}, failure.message


def test_a_native_grpc_call_envoy_answers_gets_words_not_rest_json(no_engine):
    with grpc.insecure_channel(no_engine.gateway) as channel, pytest.raises(grpc.RpcError) as refused:
        list(engine_pb2_grpc.EngineServiceStub(channel).Generate(engine_pb2.GenerateRequest(token_ids=[1]), timeout=30))
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert refused.value.details() == NO_REPLICA.format(method="EngineService/Generate")
    # REST keeps OpenAI's error object, the reason in `code`.
    rest = _post(no_engine, "/inference/v1/generate/typed", {"token_ids": [1]})
    assert rest.status_code == 503 and rest.json()["error"]["code"] == "GATEWAY_UH", rest.text


STREAMED = {
    "/v1/chat/completions": {"messages": USER, "max_tokens": 2, "stream": True},
    "/v1/messages": {"model": "SmolLM2-135M-Instruct", "messages": USER, "max_tokens": 2, "stream": True},
    "/v1/responses": {"input": "hi", "max_output_tokens": 16, "stream": True},
}


def test_streamed_one_hops_with_engine_and_derender_down_are_upstream_unavailable_every_time(no_engine):
    """Both hops refuse at once: whichever refused first is the answer, typed, before the first byte (a write to the
    derender call that had just ended used to turn it into INTERNAL "Internal error from Core", 1 time in 10)."""
    for _ in range(10):
        for path, body in STREAMED.items():
            answer = _post(no_engine, path, body)
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"]["code"] == Reason.UPSTREAM_UNAVAILABLE, answer.text
            assert answer.json()["error"]["message"] in {NO_REPLICA.format(method=hop) for hop in HOPS}, answer.text
    request = render_pb2.RenderChatRequest(
        messages=[common_pb2.ChatMessage(role="user", content=Value(string_value="hi"))]
    )
    with grpc.insecure_channel(no_engine.gateway) as channel:
        stub = chat_pb2_grpc.ChatServiceStub(channel)
        for _ in range(10):
            with pytest.raises(grpc.RpcError) as refused:
                list(stub.StreamChatCompletion(request, timeout=30))
            failure = ServiceError.from_rpc_error(refused.value)
            assert (failure.code, failure.reason) == (grpc.StatusCode.UNAVAILABLE, Reason.UPSTREAM_UNAVAILABLE)


def test_a_bare_deadline_status_is_upstream_timeout_at_the_gateway(no_engine):
    """A deadline of 1 ns ends the one-hop call in gRPC's core, whose status carries no ErrorInfo."""
    late = _post(no_engine, "/v1/chat/completions", {"messages": USER, "max_tokens": 2}, {"grpc-timeout": "1n"})
    assert late.status_code == 504, late.text
    assert late.json()["error"] == {**late.json()["error"], "type": "server_error", "code": Reason.UPSTREAM_TIMEOUT}
