"""Stopping the gateway cuts nothing in flight (issue 36: SIGTERM to Envoy cut all 9 streams, 6 SSE streams
silently): devstack's stop path drains Envoy first (gateway/drain.py), as deploy/'s preStop hook does, so every
unary answer and every stream, with its `[DONE]`, reaches its client."""

from __future__ import annotations

import threading
import time

import pytest
import requests

from devstack.stack import Stack, StackConfig
from gateway.drain import in_flight
from tests.faults.conftest import post, sse_events

CHAT = {"messages": [{"role": "user", "content": "Tell me about lighthouses."}], "max_tokens": 8, "ignore_eos": True}


def _client(stack, streamed: bool, out: list) -> None:
    try:
        answer = post(stack, "/v1/chat/completions", {**CHAT, "stream": streamed}, timeout=200)
        whole = answer.status_code == 200 and (not streamed or sse_events(answer.text)[-1] == "[DONE]")
        out.append("whole" if whole else (answer.status_code, answer.text[-200:]))
    except requests.RequestException as error:
        out.append(repr(error))


@pytest.mark.timeout(600)  # a stack of its own (stopping is the test), and 9 generations on two loaded cores
def test_stopping_the_stack_lets_every_stream_in_flight_finish(tmp_path):
    stack = Stack(StackConfig(port=0, log_dir=tmp_path / "logs"))
    with stack:
        answers: list = []
        clients = [threading.Thread(target=_client, args=(stack, i % 3 != 0, answers)) for i in range(9)]
        for client in clients:
            client.start()
        admin = f"http://{stack.config.host}:{stack.admin_port}"
        deadline = time.monotonic() + 60
        while in_flight(admin) < 9 and time.monotonic() < deadline:  # every request is in Envoy when we stop
            time.sleep(0.1)
        assert in_flight(admin) >= 9
        stack.stop(grace_s=150)
        assert stack.envoy is not None and stack.envoy.returncode is not None
        for client in clients:
            client.join(30)
    assert answers == ["whole"] * 9, answers
