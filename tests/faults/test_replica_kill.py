"""An engine replica killed mid-stream: every stream ends loudly (an in-band error event, or for the raw engine
stream, which no live hop can finish for it, a body cut short), never a 200 that simply stops; new requests
go to the replica left."""

from __future__ import annotations

import json
import threading
import time

import grpc
import pytest
import requests

from devstack.stack import Stack, StackConfig
from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc
from tests.faults.conftest import post, sse_events

LONG = {"max_tokens": 400, "ignore_eos": True}  # long enough to be mid-stream at the kill, short on CPU
USER = [{"role": "user", "content": "hi"}]
STREAMS = {
    # route, body, how a complete stream ends
    "one-hop chat (SSE)": ("/v1/chat/completions", {"messages": USER, "stream": True, **LONG}),
    "one-hop completion (SSE)": ("/v1/completions", {"prompt": "hi", "stream": True, **LONG}),
    "typed chat stream": ("/v1/chat/completions/stream", {"messages": USER, **LONG}),
    "raw engine stream": ("/inference/v1/generate/stream", {"token_ids": [1, 2, 3], "sampling_params": LONG}),
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    config = StackConfig(
        port=0,
        replicas={"render": 1, "engine": 2, "derender": 1, "chat": 1},
        service_args={"engine": ["--drain-delay-s", "0", "--drain-grace-s", "1"]},
        log_dir=tmp_path_factory.mktemp("kill-logs"),
    )
    with Stack(config) as running:
        yield running


def _outcome(stack, path, body) -> str:
    """'complete', 'error event' or 'cut short' (a body that ended without its last chunk); else what it was."""
    try:
        answer = post(stack, path, body, timeout=120, stream=True)
        text = "".join(chunk.decode() for chunk in answer.iter_content(chunk_size=None))
    except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError):
        return "cut short"
    events = sse_events(text)
    if not events:
        return f"no events: {answer.status_code} {text[:200]}"
    last = events[-1]
    if last == "[DONE]":
        last = events[-2] if len(events) > 1 else "{}"
    message = json.loads(last)
    if message.get("error"):
        return "error event"
    if message.get("finished") or any(choice.get("finish_reason") for choice in message.get("choices", [])):
        return "complete"
    return f"silent end: {last[:200]}"


def test_every_stream_ends_loudly_when_its_engine_dies(stack):
    outcomes: dict[str, str] = {}
    threads = []
    for name, (path, body) in STREAMS.items():
        for copy in range(2):  # two of each: with two engines, some land on the victim

            def run(key=f"{name} #{copy}", path=path, body=body):
                outcomes[key] = _outcome(stack, path, body)

            threads.append(threading.Thread(target=run))
    grpc_outcomes = []

    def native():
        with grpc.insecure_channel(stack.gateway) as channel:
            stub = engine_pb2_grpc.EngineServiceStub(channel)
            request = engine_pb2.GenerateRequest(token_ids=[1, 2, 3], sampling_params=common_pb2.SamplingParams(**LONG))
            try:
                last = list(stub.Generate(request, timeout=120))[-1]
                grpc_outcomes.append("complete" if last.finished else "silent end")
            except grpc.RpcError as error:
                grpc_outcomes.append(f"status {error.code().name}")

    threads += [threading.Thread(target=native) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(4)  # every stream has started generating
    victim = next(r for r in stack.replicas if r.name == "engine-0")
    victim.process.kill()
    for thread in threads:
        thread.join(150)
    assert not any(t.is_alive() for t in threads), "a stream hung after its engine died"
    print(outcomes, grpc_outcomes)
    for key, outcome in outcomes.items():
        allowed = {"error event"} if not key.startswith("raw engine") else {"cut short"}
        assert outcome in allowed | {"complete"}, (key, outcome)
    assert any(o != "complete" for o in outcomes.values()), "no stream was on the killed engine"
    assert all(o == "complete" or o.startswith("status ") for o in grpc_outcomes), grpc_outcomes
    # The survivor takes new work once the gateway's health checks have ejected the dead replica.
    time.sleep(3)
    for _ in range(4):
        answer = post(stack, "/v1/chat/completions", {"messages": USER, "max_tokens": 2})
        assert answer.status_code == 200, answer.text
