"""The fault suite: the real stack, attacked and broken on purpose, each test bounded in time.

Every test here is `slow` (tests/conftest.py marks the folder): `make test` and CI run them.
"""

from __future__ import annotations

import json

import requests

# Statuses and gRPC codes that mean "the service broke" rather than "the input was refused".
SERVER_FAULTS = ("INTERNAL", "UNKNOWN", "DATA_LOSS")
FAULT_MARKERS = ('"INTERNAL_ERROR"', '"UPSTREAM_ERROR"', '"code":"INTERNAL"', "Traceback (most recent call last)")


def post(stack, path: str, body, timeout: float = 60, headers: dict | None = None, **kwargs) -> requests.Response:
    data = body if isinstance(body, (str, bytes)) else json.dumps(body, allow_nan=True)
    headers = {"content-type": "application/json", **(headers or {})}
    return requests.post(stack.rest_url + path, data=data, headers=headers, timeout=timeout, **kwargs)


def sse_events(text: str) -> list:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]
