"""Failures no service typed reach clients with a reason of the table (real Envoy): the one-hop service passes
on Envoy's own UNAVAILABLE (no engine replica) as UPSTREAM_UNAVAILABLE, and the gateway's Lua filter names a
bare DEADLINE_EXCEEDED status UPSTREAM_TIMEOUT."""

from __future__ import annotations

import grpc
import pytest
import requests
from google.protobuf.struct_pb2 import Value

from devstack.stack import Stack, StackConfig
from scaleout.v1 import chat_pb2_grpc, common_pb2, render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason
from tests.gateway.rest import error_reason

USER = [{"role": "user", "content": "hi"}]


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


def test_a_bare_deadline_status_is_upstream_timeout_at_the_gateway(no_engine):
    """A deadline of 1 ns ends the one-hop call in gRPC's core, whose status carries no ErrorInfo."""
    late = _post(no_engine, "/v1/chat/completions", {"messages": USER, "max_tokens": 2}, {"grpc-timeout": "1n"})
    assert late.status_code == 504, late.text
    assert late.json()["error"] == {**late.json()["error"], "type": "server_error", "code": Reason.UPSTREAM_TIMEOUT}
