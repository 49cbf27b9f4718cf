"""The gateway's fixtures; `stack`, the one-replica stack, is shared with tests/clients (tests/conftest.py)."""

import json
from pathlib import Path

import pytest

from devstack.stack import Stack, StackConfig


def fleet_traces(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "fleet-traces"


@pytest.fixture(scope="package")
def fleet(tmp_path_factory):
    """The stack with two engine replicas, shared by the modules that only read it (test_metrics_route first: it
    counts every call's tokens; test_router_surface, which pauses the derender replica, last); its engines profile
    on request, into `fleet_traces`."""
    profiler = {"profiler": "torch", "torch_profiler_dir": str(fleet_traces(tmp_path_factory))}
    config = StackConfig(
        port=0,
        replicas={"render": 1, "engine": 2, "derender": 1, "chat": 1},
        log_dir=tmp_path_factory.mktemp("fleet-logs"),
        service_args={"engine": ["--profiler-config", json.dumps(profiler)]},
    )
    with Stack(config) as running:
        yield running
