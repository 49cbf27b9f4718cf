"""Overload with one engine busy and one idle: the busy one's typed refusal (RESOURCE_EXHAUSTED QUEUE_FULL) is
retried on the idle one, so nothing is refused while capacity is left; when both are full the refusal is a
fast 429 with its reason."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
import requests

from devstack.stack import Stack, StackConfig
from scaleout_common.prefix_hash import ROUTING_HEADER
from tests.faults.conftest import engine_loads, post

LONG = {"token_ids": [5, 6, 7], "sampling_params": {"max_tokens": 3000, "ignore_eos": True}}
SHORT = {"token_ids": [5, 6, 7], "sampling_params": {"max_tokens": 2}}


def _hog(stack, headers=None) -> None:
    """A long generation that holds a slot until the stack stops (its connection dies with it)."""
    with contextlib.suppress(requests.RequestException):
        post(stack, "/inference/v1/generate/typed", LONG, timeout=300, headers=headers)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    config = StackConfig(
        port=0,
        replicas={"render": 0, "engine": 2, "derender": 0, "chat": 0},
        # One sequence running and one waiting per engine: a third is QUEUE_FULL. No queue-wait budget (its own
        # refusal, tests/faults/test_queue_budget.py), which would refuse the waiting one first.
        service_args={"engine": ["--max-num-seqs", "1", "--max-waiting", "1", "--drain-grace-s", "1"]},
        env={"SCALEOUT_MAX_QUEUE_WAIT_S": "0"},
        log_dir=tmp_path_factory.mktemp("overload-logs"),
    )
    with Stack(config) as running:
        yield running
        running.stop(grace_s=1)  # the hogs are still generating: no drain to wait out


def _fill(stack, engines: int, headers=None) -> None:
    """Start long streams one at a time, each seen on an engine before the next (two arriving at once would be one
    engine's queue and be refused), until `engines` engines run one and queue one."""
    deadline = time.monotonic() + 60
    loads = engine_loads(stack)
    while sum((load.running, load.waiting) == (1, 1) for load in loads) < engines:
        held = _held(loads)
        threading.Thread(target=_hog, args=(stack, headers), daemon=True).start()
        while _held(loads := engine_loads(stack)) == held:
            assert time.monotonic() < deadline, f"the long streams did not fill the engines: {loads}"
            time.sleep(0.05)


def _held(loads) -> int:
    return sum(load.running + load.waiting for load in loads)


def test_a_busy_replicas_refusal_is_retried_on_the_idle_one(stack):
    # Two long requests with one prefix hash: both on one engine (one running, one waiting), which is now full.
    pinned = {ROUTING_HEADER: "aaaa"}
    _fill(stack, 1, pinned)
    # Each is refused by the full engine and retried on the idle one (the same path every time: ten show it).
    codes = [post(stack, "/inference/v1/generate/typed", SHORT, headers=pinned).status_code for _ in range(10)]
    assert codes == [200] * 10, codes


def test_both_full_is_a_fast_429_with_its_reason(stack):
    _fill(stack, 2)
    started = time.monotonic()
    answer = post(stack, "/inference/v1/generate/typed", SHORT)
    assert answer.status_code == 429 and answer.json()["error"]["code"] == "QUEUE_FULL", answer.text
    assert time.monotonic() - started < 2
