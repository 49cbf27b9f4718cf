"""Drain under load: SIGTERM to a render replica while requests keep coming fails none of them (readiness goes
NOT_SERVING, the replica keeps serving for --drain-delay-s while the gateway ejects it, then refuses new calls
with UNAVAILABLE, which the gateway retries on the other replica within its retry budget)."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from devstack.stack import Stack, StackConfig
from tests.faults.conftest import post

TOKENIZE = {"prompt": "Hello world"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    config = StackConfig(
        port=0,
        replicas={"render": 2, "engine": 0, "derender": 0, "chat": 0},
        log_dir=tmp_path_factory.mktemp("drain-logs"),
    )
    with Stack(config) as running:
        yield running


def test_sigterm_under_load_fails_no_request(stack):
    failures, served, stop = [], [0], threading.Event()

    def load():
        while not stop.is_set():
            answer = post(stack, "/tokenize", TOKENIZE, timeout=30)
            if answer.status_code == 200:
                served[0] += 1
            else:
                failures.append((answer.status_code, answer.text[:200]))

    workers = [threading.Thread(target=load) for _ in range(8)]
    for worker in workers:
        worker.start()
    time.sleep(2)
    victim = stack.replicas[0].process
    victim.send_signal(signal.SIGTERM)
    assert victim.wait(60) == 0
    time.sleep(2)
    stop.set()
    for worker in workers:
        worker.join(30)
    assert served[0] > 100
    assert failures == [], failures[:5]
