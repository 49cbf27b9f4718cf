"""The routers operators run (SMG in HTTP mode, vllm-router), started from their registry wheels in front of two
real scaleout stacks on the default model.

The two stacks start once for the package, side by side (their start-up is most of the package's time); each
router starts once per configuration (about a second) for the module that uses it and stops after it. Engines run
at most 4 sequences of 4,096 tokens each, so that a few long streams queue on one of them (test_load_aware.py)
and the KV cache stays small (1,025 blocks, ~0.75 GB a stack); single SDK calls never notice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from devstack.routers import Router, RouterConfig, start_side_by_side
from devstack.stack import Stack, StackConfig

MAX_NUM_SEQS = 4
# Each router with the policies issue 35 names, polling load every second rather than every 10 s (SMG) or 30 s
# (vllm-router, whose load monitor reuses --worker-startup-check-interval: src/routers/http/router.rs), so a test
# sees a saturated engine within seconds. Both flags are the routers' documented ones.
ROUTER_ARGS = {"smg": ["--load-monitor-interval", "1"], "vllm-router": ["--worker-startup-check-interval", "1"]}
CONFIGS = [
    ("smg", "cache_aware"),
    ("smg", "least_load"),
    ("smg", "power_of_two"),
    ("vllm-router", "round_robin"),
    ("vllm-router", "cache_aware"),
    ("vllm-router", "power_of_two"),
]


@pytest.fixture(scope="package")
def stacks(tmp_path_factory) -> Iterator[list[Stack]]:
    logs = tmp_path_factory.mktemp("router-stacks")
    with ExitStack() as running:
        pair = []
        for number in (1, 2):
            config = StackConfig(
                port=0,
                log_dir=logs / f"stack{number}",
                # No queue-wait budget: the saturated engine's queue is what the routers must see and avoid.
                service_args={"engine": ["--max-num-seqs", str(MAX_NUM_SEQS), "--max-model-len", "4096"]},
                env={"SCALEOUT_MAX_QUEUE_WAIT_S": "0"},
            )
            stack = Stack(config)
            running.callback(stack.stop)
            pair.append(stack)
        start_side_by_side(pair)
        yield pair


@pytest.fixture(scope="package")
def model_id(stacks) -> str:
    import requests

    return requests.get(stacks[0].rest_url + "/v1/models", timeout=10).json()["data"][0]["id"]


def start_router(stacks: list[Stack], kind: str, policy: str, log_dir, args: list[str] | None = None) -> Router:
    extra = list(args or []) + ROUTER_ARGS[kind]
    config = RouterConfig(
        kind, policy, [s.rest_url for s in stacks], args=extra, log_path=log_dir / f"{kind}-{policy}.log"
    )
    return Router(config)


@pytest.fixture(scope="module", params=CONFIGS, ids=[f"{kind}-{policy}" for kind, policy in CONFIGS])
def router(request, stacks, tmp_path_factory) -> Iterator[Router]:
    """Each router configuration in turn, started once for the tests of the module that asks for it."""
    kind, policy = request.param
    with start_router(stacks, kind, policy, tmp_path_factory.mktemp("routers")) as running:
        yield running


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" and report.failed and "router" in item.fixturenames:
        running: Router = item.funcargs["router"]
        start = item.stash.get(_LOG_START, 0)
        lines = running.log_text()[start:].splitlines()
        noted = [line for line in lines if " WARN " in line or " ERROR " in line] or lines[-20:]
        report.sections.append((f"{running.name} log during the test", "\n".join(noted[-30:])))
    return report


_LOG_START = pytest.StashKey[int]()


@pytest.fixture(autouse=True)
def _router_log_start(request):
    """Where the router's log stood when the test began, so a failure shows only its own lines."""
    if "router" in request.fixturenames:
        request.node.stash[_LOG_START] = len(request.getfixturevalue("router").log_text())
    yield
