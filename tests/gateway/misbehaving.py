"""A real gRPC RenderService that misbehaves on request, behind a real Envoy rendered by gateway.envoy_config.

Tokenize answers `{"count": 7}` after `delay_s`; a prompt `trailer:<n>` fails with an n-character status message
(the shape of an error that echoed a long client value before errors were capped), `header:<n>` sends an
n-character initial metadata value first. The replies' upstream connection is shared by every request in flight,
so these check that one oversized answer costs only its own stream.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from devstack.stack import free_port
from gateway.envoy_config import Endpoint, Upstream, render_config
from scaleout.v1 import render_pb2
from scaleout_common.server import server_options


def _tokenize(delay_s: float):
    def tokenize(request, context):
        kind, _, size = request.prompt.partition(":")
        if kind == "trailer":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "x" * int(size))
        if kind == "header":
            context.send_initial_metadata((("x-big", "m" * int(size)),))
        time.sleep(delay_s)
        return render_pb2.TokenizeResponse(count=7)

    return tokenize


@contextmanager
def misbehaving_gateway(tmp_path: Path, delay_s: float = 1.5, **config):
    """(REST base URL, gRPC target) of Envoy in front of one misbehaving RenderService replica."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32), options=server_options(64))  # the services' own
    handler = grpc.unary_unary_rpc_method_handler(
        _tokenize(delay_s),
        request_deserializer=render_pb2.TokenizeRequest.FromString,
        response_serializer=render_pb2.TokenizeResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("scaleout.v1.RenderService", {"Tokenize": handler})]
    )
    status = health.HealthServicer()
    status.set("scaleout.v1.RenderService", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(status, server)
    upstream = server.add_insecure_port("127.0.0.1:0")
    server.start()
    port, admin = free_port(), free_port()
    replica = [Endpoint("127.0.0.1", upstream)]
    path = tmp_path / "envoy.yaml"
    path.write_text(render_config([Upstream("render", replica), Upstream("chat", replica)], port, admin, **config))
    envoy = subprocess.Popen(
        [
            shutil.which("envoy", path=os.path.dirname(sys.executable)) or "envoy",
            "-c",
            str(path),
            "--disable-hot-restart",
            "-l",
            "warning",
        ],
        stderr=(tmp_path / "envoy.log").open("w"),
    )
    try:
        deadline = time.monotonic() + 60
        while "health_flags::healthy" not in _get(f"http://127.0.0.1:{admin}/clusters"):
            assert envoy.poll() is None and time.monotonic() < deadline, (tmp_path / "envoy.log").read_text()
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", f"127.0.0.1:{port}"
    finally:
        envoy.terminate()
        envoy.wait(30)
        server.stop(0)


def _get(url: str) -> str:
    try:
        return urllib.request.urlopen(url, timeout=2).read().decode()
    except OSError:
        return ""
