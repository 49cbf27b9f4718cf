"""Small REST helpers for talking to the gateway like a curl user would."""

from __future__ import annotations

import json

import requests


def post(stack, path: str, body) -> requests.Response:
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return requests.post(stack.rest_url + path, data=data, headers={"content-type": "application/json"}, timeout=120)


def sse_events(response: requests.Response) -> list[dict]:
    """The JSON events of a text/event-stream response (OpenAI's closing `data: [DONE]` left out)."""
    assert response.headers["content-type"].startswith("text/event-stream"), response.text
    data = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    return [json.loads(d) for d in data if d != "[DONE]"]


def error_reason(response: requests.Response) -> str:
    """The ErrorInfo reason of a JSON error body (transcoded google.rpc.Status or Envoy's own error)."""
    body = response.json()
    if "error" in body:
        return body["error"]["code"]
    return next(d["reason"] for d in body["details"] if d["@type"].endswith("google.rpc.ErrorInfo"))
