"""Envoy's OpenTelemetry tracer comes from the same OTEL_* variables as the services, and Envoy accepts it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from gateway.envoy_config import SERVICES, Endpoint, Tracing, Upstream, render_config


def test_tracing_off_leaves_envoy_without_a_tracer():
    assert Tracing.from_env({}) is None
    assert Tracing.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_SDK_DISABLED": "true"}) is None


@pytest.mark.parametrize(
    "env,expected",
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ("grpc", "collector", 4317, "")),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("grpc", "localhost", 4317, "")),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            ("http/protobuf", "collector", 4318, "/v1/traces"),
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:9999/custom",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            },
            ("http/protobuf", "c", 9999, "/custom"),
        ),
    ],
)
def test_envoy_tracer_config_is_valid(env, expected, tmp_path):
    tracing = Tracing.from_env(env)
    assert (tracing.protocol, tracing.host, tracing.port, tracing.path) == expected
    upstreams = [Upstream(role, [Endpoint("127.0.0.1", 50051 + i)]) for i, role in enumerate(SERVICES)]
    config = tmp_path / "envoy.yaml"
    config.write_text(render_config(upstreams, 8080, 9901, tracing=tracing))
    assert "envoy.tracers.opentelemetry" in config.read_text()
    envoy = shutil.which("envoy", path=os.path.dirname(sys.executable)) or shutil.which("envoy")
    result = subprocess.run(
        [envoy, "--mode", "validate", "-c", str(config)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
