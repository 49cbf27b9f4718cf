"""bench/engine/isolate.py: a bench configuration runs in a process of its own (its GPU memory goes with it), and
its result comes back."""

from __future__ import annotations

import os

from bench.engine.isolate import in_child


def test_a_configuration_runs_in_another_process():
    assert in_child(os.getpid) != os.getpid()
