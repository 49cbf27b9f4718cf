"""Test tiers: `slow` marks what starts Envoy and the whole stack or loads a real model's weights.

`make check` runs `-m "not slow"` (the fast tier: units and single services on loopback with tiny models or
the default tokenizer, under a minute); `make test` runs everything.
"""

from __future__ import annotations

import pytest

# Files (or folders) whose tests start the stack behind Envoy or load a real model.
SLOW_PATHS = (
    "tests/gateway/",
    "tests/clients/",
    "tests/faults/",
    "tests/observability/test_stack_telemetry.py",
    "tests/engine/test_parity.py",
    "tests/test_models.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.replace("\\", "/")
        if any(path.startswith(slow) for slow in SLOW_PATHS):
            item.add_marker(pytest.mark.slow)
