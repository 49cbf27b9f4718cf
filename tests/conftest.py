"""Test tiers: `slow` marks what starts Envoy, the whole stack, or generates with a model (even a tiny one).

`make check` runs `-m "not slow"`: the fast tier (units, parsers, templates and single CPU services on
loopback with the default tokenizer), ~2.5 minutes in two workers on two idle cores. `make test` runs everything.
"""

from __future__ import annotations

import gc
import os

import psutil
import pytest

# On a few cores (CI's two), one OpenMP thread for torch here and in every process the tests start (they inherit
# the environment; set before torch loads): the stacks' processes and the tests share the cores, and a second thread
# per process spins at every parallel region's end while the others wait for a core. Measured on two shared cores,
# two threads against one: an engine's 40 greedy tokens 12.6 s of CPU against 3.2 s; tests/engine/test_parity.py with
# tests/gateway/test_vllm_generate.py 346 and 365 s against 79 and 43 s; four tests/faults modules 415 against 292 s.
if (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) <= 4:
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# Files (or folders) whose tests start the stack behind Envoy or generate with a model; the engine's are
# measured in tens of seconds each on two cores.
SLOW_PATHS = (
    "tests/gateway/",
    "tests/clients/",
    "tests/faults/",
    "tests/observability/test_stack_telemetry.py",
    "tests/observability/test_plumbing.py",
    "tests/engine/test_parity.py",
    "tests/engine/test_structured_outputs.py",
    "tests/engine/test_prefix_cache.py",
    "tests/engine/test_core_process.py",
    "tests/engine/test_api_servers.py",
    "tests/engine/test_generate.py",
    "tests/engine/test_cancel.py",
    "tests/render/test_parity.py",
    "tests/test_models.py",
)


# The packages on the shared `stack` below run last, in this order: the stack then starts once for both and
# stops at the session's end, right after its last user.
LAST_PATHS = ("tests/clients/", "tests/gateway/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.replace("\\", "/")
        if any(path.startswith(slow) for slow in SLOW_PATHS):
            item.add_marker(pytest.mark.slow)

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.replace("\\", "/")
        return next((i + 1 for i, last in enumerate(LAST_PATHS) if path.startswith(last)), 0)

    items.sort(key=rank)  # stable: every package keeps its own order


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """The whole stack for tests/clients and tests/gateway: real render, engine, derender and chat processes on the
    default model, real Envoy; render serves vLLM's opt-in `/tokenizer_info` (test_vllm_routes); logprobs up to 100
    alternatives (TRL's get_sequence_logprobs default, tests/clients/test_trl_client.py)."""
    from devstack.stack import Stack, StackConfig  # here: the GPU machine's kernel tests run without grpc_tools

    config = StackConfig(
        port=0,
        log_dir=tmp_path_factory.mktemp("stack-logs"),
        service_args={"render": ["--enable-tokenizer-info-endpoint"]},
        max_logprobs=100,
    )
    with Stack(config) as running:
        yield running


# In-process engines' KV caches and models (~1.5 GB for the default model's) live in reference cycles that only a
# full collection frees; after a module that left about two of them behind, one is run rather than waited for (the
# process idles near 1.4 GB, so a lower bound would collect after nearly every module, ~0.3 s each).
COLLECT_ABOVE_BYTES = 3 << 30


@pytest.fixture(scope="module", autouse=True)
def _collect_engines_left_behind():
    yield
    if psutil.Process().memory_info().rss > COLLECT_ABOVE_BYTES:
        gc.collect()
