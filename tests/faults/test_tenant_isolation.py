"""One tenant cannot fail or lock out the others (issue 36), through the real stack and its real Envoy:

- a request with a field tens of thousands of characters long, beside 8 other tenants' unary and streamed chats in
  flight: every bystander is answered in full (the error no longer echoes the value into trailers that reset the
  upstream connection every request shares);
- uploads stalled up to the heap limit, over HTTP/1.1 and HTTP/2: another client keeps getting answers, and the
  stalled uploads are let go;
- ~10,000 sockets that never send a byte: another client still connects and is answered, and the silent sockets
  are closed within seconds.
Each test is bounded in time.
"""

from __future__ import annotations

import threading
import time

import pytest
import requests

from devstack.attacks import SilentSockets, StalledBodies, long_fields, raise_open_files
from devstack.stack import Stack, StackConfig
from gateway.limits import Limits
from tests.faults.conftest import post, sse_events

HEAP_MB = 256  # the gateway's heap limit here: a few stalled bodies reach it
LIMITS = Limits(max_heap_mb=HEAP_MB, request_timeout_s=12)  # the stalled bodies' last moment, shortened
CHAT = {"messages": [{"role": "user", "content": "Count to ten."}], "max_tokens": 6, "ignore_eos": True}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    raise_open_files(20_000)  # the flood's sockets here, and Envoy's (it inherits the limit)
    config = StackConfig(port=0, limits=LIMITS, log_dir=tmp_path_factory.mktemp("isolation-logs"))
    with Stack(config) as running:
        yield running


def _tenant(stack, streamed: bool, out: list) -> None:
    try:
        answer = post(stack, "/v1/chat/completions", {**CHAT, "stream": streamed}, timeout=200)
        done = answer.status_code == 200 and (not streamed or sse_events(answer.text)[-1] == "[DONE]")
        out.append("ok" if done else (answer.status_code, answer.text[-200:]))
    except requests.RequestException as error:
        out.append(repr(error))


@pytest.mark.timeout(900)
def test_a_long_field_fails_no_other_tenant(stack):
    for path, body in long_fields():
        bystanders: list = []
        tenants = [threading.Thread(target=_tenant, args=(stack, i % 2 == 1, bystanders)) for i in range(8)]
        for tenant in tenants:
            tenant.start()
        time.sleep(1.0)  # their calls are in flight on the gateway's upstream connections
        answer = post(stack, path, body)
        for tenant in tenants:
            tenant.join(220)
        assert bystanders == ["ok"] * 8, (path, bystanders)
        assert answer.status_code == 400, answer.text[:300]
        assert len(answer.text) < 5_000 and "characters)" in answer.text, f"{path}: {len(answer.text)} characters"


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
def test_stalled_bodies_up_to_the_heap_limit_refuse_no_one_else(stack, http2):
    """Stalled uploads worth 1.25 heap limits: reset_high_memory_stream (HTTP/2) or the idle cut that the heap
    scales down (HTTP/1.1, which Envoy cannot reset by memory) lets enough go before anyone else is refused, and
    the request timeout lets the rest go."""
    count = HEAP_MB * 5 // 4 // 24
    attack = StalledBodies(stack.config.host, stack.port, "/v1/chat/completions/render", count, 24, http2=http2)
    try:
        answers, started = [], time.monotonic()
        # Served throughout, until every stalled upload has been let go (the request timeout at the latest).
        while time.monotonic() - started < LIMITS.request_timeout_s + 5 and (attack.held() or len(answers) < 8):
            try:
                answers.append(post(stack, "/tokenize", {"prompt": "still serving"}, timeout=10).status_code)
            except requests.RequestException as error:
                answers.append(type(error).__name__)
            time.sleep(0.25)
        assert answers.count(200) == len(answers), answers
        assert attack.held() == 0, "every stalled upload is let go"
    finally:
        attack.close()


def test_ten_thousand_silent_sockets_lock_no_one_out(stack):
    wanted = min(Limits().max_connections, raise_open_files(20_000) - 2_000)
    attack = SilentSockets(stack.config.host, stack.port, wanted)
    try:
        assert len(attack.sockets) >= 0.9 * wanted, len(attack.sockets)
        started = time.monotonic()
        answer = None
        while answer is None and time.monotonic() - started < LIMITS.connect_timeout_s + 10:
            try:
                answer = post(stack, "/tokenize", {"prompt": "let me in"}, timeout=5)
            except requests.RequestException:
                time.sleep(0.2)
        waited = time.monotonic() - started
        assert answer is not None and answer.status_code == 200, waited
        assert waited < LIMITS.connect_timeout_s + 5, waited
        time.sleep(LIMITS.connect_timeout_s + 2)
        assert attack.held() == 0, "silent sockets are closed"
    finally:
        attack.close()
