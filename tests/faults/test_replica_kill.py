"""An engine replica killed mid-stream: every stream ends loudly, with an in-band error event a client can
parse, never a 200 that simply stops or is cut short (the raw REST engine stream too: the one-hop service relays
it, pipeline_svc/engine_stream.py); native gRPC streams end with a status; new requests go to the replica
left."""

from __future__ import annotations

import json
import threading
import time

import grpc
import pytest
import requests

from devstack.stack import Stack, StackConfig
from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc
from scaleout_common.reasons import Reason
from tests.faults.conftest import post, sse_events

LONG = {"max_tokens": 400, "ignore_eos": True}  # the victim's pinned stream: surely mid-stream at the kill
# The others may end either way (complete, or an error event on the victim): short, so the survivor's end soon.
SHORT = {"max_tokens": 96, "ignore_eos": True}
USER = [{"role": "user", "content": "hi"}]
STREAMS = {
    # route, body, how a complete stream ends
    "one-hop chat (SSE)": ("/v1/chat/completions", {"messages": USER, "stream": True, **SHORT}),
    "one-hop completion (SSE)": ("/v1/completions", {"prompt": "hi", "stream": True, **SHORT}),
    "typed chat stream": ("/v1/chat/completions/stream", {"messages": USER, **SHORT}),
    "raw engine stream": ("/inference/v1/generate/stream", {"token_ids": [1, 2, 3], "sampling_params": SHORT}),
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


def _outcome(stack, path, body, errors: list | None = None, started: threading.Event | None = None) -> str:
    """'complete', 'error event' (its error object joins `errors`) or 'cut short' (a body that ended without its
    last chunk); else what it was. `started` is set once the first bytes of the stream have come."""
    try:
        answer = post(stack, path, body, timeout=120, stream=True)
        chunks = []
        for chunk in answer.iter_content(chunk_size=None):
            chunks.append(chunk.decode())
            if started is not None:
                started.set()
        text = "".join(chunks)
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
        if errors is not None:
            errors.append(message["error"])
        return "error event"
    if message.get("finished") or any(choice.get("finish_reason") for choice in message.get("choices", [])):
        return "complete"
    return f"silent end: {last[:200]}"


def _engines_running(stack) -> dict[str, int]:
    """Sequences running on each engine replica, asked of the replica itself."""
    running = {}
    for replica in (r for r in stack.replicas if r.name.startswith("engine-")):
        with grpc.insecure_channel(f"127.0.0.1:{replica.port}") as channel:
            load = engine_pb2_grpc.EngineServiceStub(channel).GetLoad(engine_pb2.GetLoadRequest(), timeout=10)
        running[replica.name] = load.running
    return running


def test_every_stream_ends_loudly_when_its_engine_dies(stack):
    outcomes: dict[str, str] = {}
    # One raw REST stream starts alone, and the engine that runs it is the one killed: that route's in-band
    # error is always exercised (the others land on either replica).
    raw_errors: list[dict] = []

    started: list[threading.Event] = [threading.Event()]

    def pinned():
        body = {"token_ids": [1, 2, 3], "sampling_params": LONG}
        outcome = _outcome(stack, "/inference/v1/generate/stream", body, raw_errors, started[0])
        outcomes["raw engine stream (on the victim)"] = outcome

    threads = [threading.Thread(target=pinned)]
    threads[0].start()
    deadline = time.monotonic() + 30
    while not any((busy := _engines_running(stack)).values()):
        assert time.monotonic() < deadline, "the raw stream never started"
        time.sleep(0.05)
    victim_name = next(name for name, count in busy.items() if count)
    for name, (path, body) in STREAMS.items():
        for copy in range(2):  # two of each: with two engines, some land on the victim

            def run(event: threading.Event, key=f"{name} #{copy}", path=path, body=body):
                outcomes[key] = _outcome(stack, path, body, started=event)

            started.append(threading.Event())
            threads.append(threading.Thread(target=run, args=(started[-1],)))
    grpc_outcomes = []

    def native(event: threading.Event):
        with grpc.insecure_channel(stack.gateway) as channel:
            stub = engine_pb2_grpc.EngineServiceStub(channel)
            request = engine_pb2.GenerateRequest(
                token_ids=[1, 2, 3], sampling_params=common_pb2.SamplingParams(**SHORT)
            )
            try:
                last = None
                for message in stub.Generate(request, timeout=120):
                    event.set()
                    last = message
                grpc_outcomes.append("complete" if last is not None and last.finished else "silent end")
            except grpc.RpcError as error:
                grpc_outcomes.append(f"status {error.code().name}")

    started += [threading.Event(), threading.Event()]
    threads += [threading.Thread(target=native, args=(event,)) for event in started[-2:]]
    for thread in threads[1:]:
        thread.start()
    # Every stream is mid-stream at the kill: its first bytes have come (waited for, not assumed after a pause; on a
    # loaded machine a stream could still be on its way in, and one the engine dies under before its first token
    # gets a status, not an event: another case).
    deadline = time.monotonic() + 60
    while not all(event.is_set() for event in started):
        assert time.monotonic() < deadline, "the streams never all started"
        time.sleep(0.05)
    victim = next(r for r in stack.replicas if r.name == victim_name)
    victim.process.kill()
    for thread in threads:
        thread.join(150)
    assert not any(t.is_alive() for t in threads), "a stream hung after its engine died"
    print(outcomes, grpc_outcomes)
    for key, outcome in outcomes.items():
        assert outcome in ("complete", "error event"), (key, outcome)
    # The raw stream's last message is a GenerateResponse whose `error` is a google.rpc.Status with its reason.
    assert outcomes["raw engine stream (on the victim)"] == "error event", outcomes
    [error] = raw_errors
    reasons = [d.get("reason") for d in error["details"] if d["@type"].endswith("google.rpc.ErrorInfo")]
    assert error["code"] == Reason.UPSTREAM_LOST.code.value[0] and reasons == [Reason.UPSTREAM_LOST], error
    assert all(o == "complete" or o.startswith("status ") for o in grpc_outcomes), grpc_outcomes
    # The survivor takes new work once the gateway's health checks have ejected the dead replica.
    time.sleep(3)
    for _ in range(4):
        answer = post(stack, "/v1/chat/completions", {"messages": USER, "max_tokens": 2})
        assert answer.status_code == 200, answer.text
