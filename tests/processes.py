"""Services and peers started as processes of their own (engines, routers, workers) for the real-peer tests."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def process(args: list[str], log, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)


def serving(port: int) -> bool:
    """Whether the gRPC server on this loopback port says SERVING (false while it loads or is not up)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            stub = health_pb2_grpc.HealthStub(channel)  # typeshed's HealthStub omits Check
            answer = stub.Check(health_pb2.HealthCheckRequest(), timeout=2)  # pyright: ignore[reportAttributeAccessIssue]
        except grpc.RpcError:
            return False
    return answer.status == health_pb2.HealthCheckResponse.SERVING


def wait(ready: Callable[[], bool], what: str, processes: list[subprocess.Popen], timeout_s: float = 300) -> None:
    """Until `ready()`; RuntimeError when one of `processes` exits first or the time is up."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up")
        time.sleep(0.5)
