"""A saturated and an idle engine: requests pinned (by their prefix hash) to the engine whose slots are held by
long streams are refused by it at once (QUEUE_WAIT_OVER_BUDGET, engine_svc/serving/queue_budget.py) and served
by the idle one, instead of queueing behind the streams; with every engine over budget the answer is a fast
429 with Retry-After."""

from __future__ import annotations

import contextlib
import threading
import time

import grpc
import pytest
import requests

from devstack.stack import Stack, StackConfig
from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc
from scaleout_common.prefix_hash import ROUTING_HEADER
from tests.faults.conftest import engine_loads, post

LONG = {"token_ids": [5, 6, 7], "sampling_params": {"max_tokens": 4000, "ignore_eos": True}}
SHORT = {"token_ids": [5, 6, 7], "sampling_params": {"max_tokens": 2}}
PINNED = {ROUTING_HEADER: "aaaa"}  # every request with this key hashes to one engine


def _hog(stack) -> None:
    """A long generation that holds a slot until the stack stops (its connection dies with it)."""
    with contextlib.suppress(requests.RequestException):
        post(stack, "/inference/v1/generate/typed", LONG, timeout=300, headers=PINNED)


def _refuses(engine) -> bool:
    """Whether the engine refuses a short request at once now: its slots are held and its decode pace measured
    (no pace, no refusal). One it admits instead gives up after a second (its abort leaves the engine's figures)."""
    with grpc.insecure_channel(f"127.0.0.1:{engine.bound_port}") as channel:
        short = engine_pb2.GenerateRequest(token_ids=[5, 6, 7], sampling_params=common_pb2.SamplingParams(max_tokens=2))
        try:
            engine_pb2_grpc.EngineServiceStub(channel).GenerateUnary(short, timeout=1)
        except grpc.RpcError as error:
            return error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    return False


def _hogs(stack, count: int, saturated: int) -> None:
    """Start `count` long streams and wait until `saturated` engines run two each and refuse over their budget."""
    for _ in range(count):
        threading.Thread(target=_hog, args=(stack,), daemon=True).start()
        time.sleep(1)
    engines = [r for r in stack.replicas if r.name.startswith("engine")]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        loads = engine_loads(stack)
        full = [engine for engine, load in zip(engines, loads) if load.running == 2]
        if len(full) >= saturated and all(_refuses(engine) for engine in full):
            return
        time.sleep(0.5)
    raise AssertionError(f"the long streams did not start: {loads}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    config = StackConfig(
        port=0,
        replicas={"render": 0, "engine": 2, "derender": 0, "chat": 0},
        # Two slots per engine: two long streams saturate one. The default budget (10 s).
        service_args={"engine": ["--max-num-seqs", "2", "--drain-grace-s", "1"]},
        log_dir=tmp_path_factory.mktemp("queue-budget-logs"),
    )
    with Stack(config) as running:
        yield running
        running.stop(grace_s=1)  # the hogs are still generating: no drain to wait out


def test_requests_pinned_to_the_saturated_engine_are_served_by_the_idle_one(stack):
    _hogs(stack, 2, saturated=1)  # both on the pinned engine: its two slots, for minutes
    waits = []
    for _ in range(4):
        started = time.monotonic()
        answer = post(stack, "/inference/v1/generate/typed", SHORT, timeout=60, headers=PINNED)
        waits.append(time.monotonic() - started)
        assert answer.status_code == 200, answer.text
    # Queued behind the streams, each would wait for minutes (4,000 steps); on the idle engine, a few steps.
    assert max(waits) < 30, waits


def test_every_engine_over_budget_is_a_fast_429_with_retry_after(stack):
    _hogs(stack, 2, saturated=2)  # refused by the saturated engine, so they hold the other one's two slots
    started = time.monotonic()
    answer = post(stack, "/inference/v1/generate/typed", SHORT, timeout=20, headers=PINNED)
    assert time.monotonic() - started < 2
    assert answer.status_code == 429 and answer.json()["error"]["code"] == "QUEUE_WAIT_OVER_BUDGET", answer.text
    assert int(answer.headers["retry-after"]) >= 1, answer.headers
