"""The fault suite: the real stack, attacked and broken on purpose, each test bounded in time.

Every test here is `slow` (tests/conftest.py marks the folder): `make test` and CI run them.
"""

from __future__ import annotations

import json

import grpc
import requests

from scaleout.v1 import engine_pb2, engine_pb2_grpc

# Statuses and gRPC codes that mean "the service broke" rather than "the input was refused".
SERVER_FAULTS = ("INTERNAL", "UNKNOWN", "DATA_LOSS")
FAULT_MARKERS = ('"INTERNAL_ERROR"', '"UPSTREAM_ERROR"', '"code":"INTERNAL"', "Traceback (most recent call last)")


def post(stack, path: str, body, timeout: float = 60, headers: dict | None = None, **kwargs) -> requests.Response:
    data = body if isinstance(body, (str, bytes)) else json.dumps(body, allow_nan=True)
    headers = {"content-type": "application/json", **(headers or {})}
    return requests.post(stack.rest_url + path, data=data, headers=headers, timeout=timeout, **kwargs)


def sse_events(text: str) -> list:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


def engine_loads(stack) -> list[engine_pb2.GetLoadResponse]:
    """Each engine replica's GetLoad, in replica order."""
    loads = []
    for engine in (r for r in stack.replicas if r.name.startswith("engine")):
        with grpc.insecure_channel(f"127.0.0.1:{engine.bound_port}") as channel:
            loads.append(engine_pb2_grpc.EngineServiceStub(channel).GetLoad(engine_pb2.GetLoadRequest(), timeout=10))
    return loads
