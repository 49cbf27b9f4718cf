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
    """The ErrorInfo reason of a JSON error body (transcoded google.rpc.Status, Envoy's own error, or vLLM's
    ErrorResponse)."""
    body = response.json()
    if "error" in body and isinstance(body["error"]["code"], str):
        return body["error"]["code"]
    if "error" in body:  # vLLM's routes: `code` is the HTTP status, the reason in the details
        body = body["error"]
    return next(d["reason"] for d in body["details"] if d["@type"].endswith("google.rpc.ErrorInfo"))


def detail_reason(error: dict) -> str:
    """The ErrorInfo reason in an error object's `details` (vLLM's ErrorResponse, whose `code` is the HTTP status)."""
    return next(d["reason"] for d in error["details"] if d["@type"].endswith("google.rpc.ErrorInfo"))
