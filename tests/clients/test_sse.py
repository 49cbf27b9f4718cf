"""The OpenAI routes' server-sent events read off the socket, as an EventSource consumer reads them.

Every stream is `data: <json>\\n\\n` events ending with `data: [DONE]\\n\\n` and nothing else (no `event:`,
`id:` or comment lines, no CR), and the events leave the gateway as they are generated, not buffered.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

pytestmark = pytest.mark.slow

COUNT = [{"role": "user", "content": "Count from 1 to 100, separated by commas."}]
DONE = "[DONE]"


def read_stream(url: str, body: dict) -> tuple[httpx.Response, bytes, list[tuple[float, int]]]:
    """(response, raw body, [(seconds since the request, bytes so far)] for every read off the socket)."""
    reads, raw = [], b""
    start = time.perf_counter()
    with httpx.Client(timeout=120) as http, http.stream("POST", url, json=body) as response:
        for piece in response.iter_raw():
            raw += piece
            reads.append((time.perf_counter() - start, len(raw)))
    return response, raw, reads


def parse_event_stream(text: str) -> list[str]:
    """The `data` of every event, by the WHATWG event-stream rules (what EventSource does)."""
    events, data = [], []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line == "":
            if data:
                events.append("\n".join(data))
            data = []
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    return events


def check_framing(raw: bytes) -> list[dict]:
    """Strict framing: every event is one `data: <json object>` line and a blank line; [DONE] ends it."""
    text = raw.decode("utf-8")  # never broken UTF-8, not even split across events
    assert "\r" not in text
    assert text.endswith("\n\ndata: [DONE]\n\n"), text[-200:]
    blocks = text[: -len("\n\n")].split("\n\n")
    assert all(block.startswith("data: ") and "\n" not in block for block in blocks), blocks
    payloads = [block[len("data: ") :] for block in blocks]
    assert payloads[-1] == DONE and DONE not in payloads[:-1]
    assert parse_event_stream(text) == payloads  # what an EventSource reader sees
    events = [json.loads(p) for p in payloads[:-1]]
    assert all(isinstance(e, dict) and "error" not in e for e in events)
    return events


CASES = {
    "chat": ("/v1/chat/completions", {"messages": COUNT}),
    "chat n=2 include_usage": (
        "/v1/chat/completions",
        {"messages": COUNT, "n": 2, "stream_options": {"include_usage": True}},
    ),
    "chat continuous usage": (
        "/v1/chat/completions",
        {"messages": COUNT, "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    ),
    "completions": ("/v1/completions", {"prompt": "1, 2, 3,"}),
    "completions two prompts include_usage": (
        "/v1/completions",
        {"prompt": ["1, 2, 3,", "a, b, c,"], "stream_options": {"include_usage": True}},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_stream_is_data_events_ending_with_done(stack, model_id, case):
    path, body = CASES[case]
    request = {"model": model_id, "max_tokens": 5, "stream": True, **body}
    response, raw, _ = read_stream(stack.rest_url + path, request)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "content-length" not in response.headers  # written as it comes
    events = check_framing(raw)
    kind = "chat.completion.chunk" if path.startswith("/v1/chat") else "text_completion"
    assert {e["object"] for e in events} == {kind} and len({e["id"] for e in events}) == 1
    if body.get("stream_options", {}).get("include_usage"):
        assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] > 0
        continuous = body["stream_options"].get("continuous_usage_stats", False)
        assert all((e["usage"] is not None) == continuous for e in events[:-1])
    else:
        assert all("usage" not in e for e in events)


def test_an_error_before_the_stream_is_an_http_error_not_an_event(stack, model_id):
    request = {"model": model_id, "messages": COUNT, "temperature": -1, "stream": True}
    response = httpx.post(stack.rest_url + "/v1/chat/completions", json=request, timeout=60)
    assert response.status_code == 400 and response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["param"] == "temperature"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_events_arrive_as_tokens_are_generated(stack, model_id, path):
    """64 tokens: the first event is read long before the last token exists, and reads spread over the run."""
    body = {"messages": COUNT} if path == "/v1/chat/completions" else {"prompt": "1, 2, 3,"}
    request = {"model": model_id, "max_tokens": 64, "ignore_eos": True, "stream": True, **body}
    _, raw, reads = read_stream(stack.rest_url + path, request)
    events = check_framing(raw)
    assert sum(1 for e in events for _ in e["choices"]) >= 32  # about one event per token (UTF-8 may merge)
    boundaries, arrivals = _event_ends(raw), []
    for end in boundaries:
        arrivals.append(next(t for t, received in reads if received >= end))
    first, last = arrivals[0], arrivals[-1]
    assert first < 0.5 * last, f"first event after {first:.2f}s of {last:.2f}s: the stream was buffered"
    distinct = len({round(t, 4) for t in arrivals})
    assert distinct >= 16, f"{len(arrivals)} events arrived in only {distinct} reads"
    assert arrivals[len(arrivals) // 2] - first > 0.25 * (last - first)  # spread out, not a burst at the end


def _event_ends(raw: bytes) -> list[int]:
    """The byte offset just past each event."""
    ends, at = [], 0
    while (found := raw.find(b"\n\n", at)) >= 0:
        at = found + 2
        ends.append(at)
    return ends
