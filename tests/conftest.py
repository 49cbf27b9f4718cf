"""Test tiers: `slow` marks what starts Envoy, the whole stack, or generates with a model (even a tiny one).

`make check` runs `-m "not slow"`: the fast tier (units, parsers, templates and single CPU services on
loopback with the default tokenizer), under a minute on two idle cores. `make test` runs everything.
"""

from __future__ import annotations

import gc

import psutil
import pytest

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
    "tests/engine/test_generate.py",
    "tests/engine/test_cancel.py",
    "tests/render/test_parity.py",
    "tests/test_models.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.replace("\\", "/")
        if any(path.startswith(slow) for slow in SLOW_PATHS):
            item.add_marker(pytest.mark.slow)


# In-process engines' KV caches and models (~1.5 GB for the default model's) live in reference cycles that only a
# full collection frees; after a module that left about two of them behind, one is run rather than waited for (the
# process idles near 1.4 GB, so a lower bound would collect after nearly every module, ~0.3 s each).
COLLECT_ABOVE_BYTES = 3 << 30


@pytest.fixture(scope="module", autouse=True)
def _collect_engines_left_behind():
    yield
    if psutil.Process().memory_info().rss > COLLECT_ABOVE_BYTES:
        gc.collect()
