"""The dev stack supervises its children: a replica or Envoy that dies is logged and restarted on its port."""

from __future__ import annotations

import time

import pytest

from devstack.stack import Stack, StackConfig
from tests.faults.conftest import post


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    config = StackConfig(
        port=0,
        replicas={"render": 1, "engine": 0, "derender": 0, "chat": 0},
        supervise=True,
        log_dir=tmp_path_factory.mktemp("supervised-logs"),
    )
    with Stack(config) as running:
        yield running


def _serves_within(stack, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if post(stack, "/tokenize", {"prompt": "hi"}, timeout=5).status_code == 200:
                return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def test_a_killed_replica_is_restarted_on_its_port(stack):
    before = stack.replicas[0]
    before.process.kill()
    assert _serves_within(stack, 60)
    after = stack.replicas[0]
    assert after.process.pid != before.process.pid and after.port == before.port and after.restarts == 1


def test_a_killed_envoy_is_restarted(stack):
    pid = stack.envoy.pid
    stack.envoy.kill()
    assert _serves_within(stack, 30)
    assert stack.envoy.pid != pid
