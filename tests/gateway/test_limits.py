"""The gateway is bounded: body and header limits answer with a reason, big documented answers still pass, and
the Envoy config carries the overload manager, connection, stream and timeout limits."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import requests
import yaml

from gateway.envoy_config import Endpoint, Upstream, render_config
from gateway.limits import Limits
from tests.gateway.rest import post


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_body_over_the_limit_is_a_413_with_a_reason(stack):
    body = b'{"messages":[{"role":"user","content":"' + b"a" * (Limits().max_body_bytes + 1024) + b'"}]}'
    answer = post(stack, "/v1/chat/completions", body)  # OpenAI's error shape (the render routes answer vLLM's)
    assert answer.status_code == 413, answer.text[:300]
    error = answer.json()["error"]
    assert error["code"] == "REQUEST_BODY_TOO_LARGE" and error["type"] == "invalid_request_error"


def test_a_chunked_body_over_the_limit_is_a_413_too(stack):
    chunk = b"a" * (1 << 20)
    count = Limits().max_body_mb + 4

    def body():
        yield b'{"messages":[{"role":"user","content":"'
        for _ in range(count):
            yield chunk
        yield b'"}]}'

    answer = requests.post(
        stack.rest_url + "/v1/chat/completions", data=body(), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "REQUEST_BODY_TOO_LARGE"


def test_headers_over_the_limits_are_a_431_with_a_reason(stack):
    for headers in ({"x-big": "a" * 70_000}, {f"x-h{i}": "a" for i in range(120)}):
        answer = requests.post(stack.rest_url + "/tokenize", json={"prompt": "hi"}, headers=headers, timeout=30)
        assert answer.status_code == 431
        assert answer.json()["error"]["code"] == "REQUEST_HEADERS_TOO_LARGE"


def test_render_batch_within_its_documented_limit_is_answered(stack):
    """3,000 conversations: the answer (~4 MB of JSON) is larger than Envoy's default transcoder buffer."""
    batch = {"requests": [{"messages": [{"role": "user", "content": f"hello number {i} " * 5}]} for i in range(3000)]}
    answer = post(stack, "/v1/chat/completions/render_batch", batch)
    assert answer.status_code == 200, answer.text[:300]
    assert len(answer.json()["responses"]) == 3000


def test_memory_stays_bounded_under_concurrent_100_mb_bodies(stack):
    """The attack of issue 18 (4 x 100 MB at once took Envoy from 155 MiB to 1.8 GiB): refused at the limit."""
    body = b'{"messages":[{"role":"user","content":"' + b"a" * (100 << 20) + b'"}]}'
    before, peak = _rss_mib(stack.envoy.pid), 0.0
    codes = []

    def attack():
        try:
            codes.append(post(stack, "/v1/chat/completions/render", body).status_code)
        except requests.ConnectionError:
            codes.append("closed")  # refused before the whole body was sent

    threads = [threading.Thread(target=attack) for _ in range(4)]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, _rss_mib(stack.envoy.pid))
        time.sleep(0.05)
    assert all(code in (413, "closed") for code in codes), codes
    # Each stream holds at most the body limit; far below the heap limit the overload manager enforces.
    assert peak - before < 4 * Limits().max_body_mb + 128, (before, peak)
    assert post(stack, "/tokenize", {"prompt": "still serving"}).status_code == 200


def test_a_slow_client_cannot_hold_a_connection_open_without_headers(stack):
    with socket.create_connection((stack.config.host, stack.port)) as sock:
        sock.sendall(b"POST /tokenize HTTP/1.1\r\nhost: x\r\n")  # and nothing more
        sock.settimeout(Limits().request_headers_timeout_s + 10)
        started = time.monotonic()
        data = sock.recv(4096)
        assert time.monotonic() - started <= Limits().request_headers_timeout_s + 5
        assert data == b"" or data.startswith(b"HTTP/1.1 408"), data[:100]


def test_the_config_bounds_memory_connections_streams_and_time(tmp_path):
    limits = Limits(rate_limit_rps=7)
    config = yaml.safe_load(
        render_config(
            [Upstream("render", [Endpoint("127.0.0.1", 1)]), Upstream("engine", [Endpoint("127.0.0.1", 2)])],
            8080,
            9901,
            limits=limits,
        )
    )
    assert config["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"
    monitors = {m["name"]: m["typed_config"] for m in config["overload_manager"]["resource_monitors"]}
    assert monitors["envoy.resource_monitors.fixed_heap"]["max_heap_size_bytes"] == limits.max_heap_bytes
    assert "envoy.resource_monitors.global_downstream_max_connections" in monitors
    actions = {a["name"] for a in config["overload_manager"]["actions"]}
    assert {
        "envoy.overload_actions.stop_accepting_requests",
        "envoy.overload_actions.reset_high_memory_stream",
    } <= actions
    manager = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert manager["http2_protocol_options"]["max_concurrent_streams"] == limits.max_concurrent_streams
    assert manager["request_headers_timeout"] == f"{limits.request_headers_timeout_s}s"
    routes = manager["route_config"]["virtual_hosts"][0]["routes"]
    streaming = [r for r in routes if r["match"].get("path") == "/scaleout.v1.EngineService/Generate"]
    unary = [r for r in routes if r["match"].get("prefix") == "/scaleout.v1.RenderService/"]
    assert streaming[0]["route"]["timeout"] == "0s" and streaming[0]["route"]["idle_timeout"] == "0s"
    assert unary[0]["route"]["idle_timeout"] == f"{limits.unary_idle_timeout_s}s"
    generating = [r for r in routes if r["match"].get("prefix") == "/scaleout.v1.EngineService/"]
    assert generating[0]["route"]["idle_timeout"] == "0s", "a unary generation sends nothing until it is done"
    filters = {f["name"]: f["typed_config"] for f in manager["http_filters"]}
    assert filters["envoy.filters.http.buffer"]["max_request_bytes"] == limits.min_body_bytes
    assert filters["envoy.filters.http.local_ratelimit"]["descriptors"][0]["token_bucket"]["tokens_per_fill"] == 7
    assert "envoy.filters.http.local_ratelimit" not in json.dumps(render_config([], 1, 2))
