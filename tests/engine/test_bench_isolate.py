"""Bench configurations free the GPU for the next: an in-process engine's `release` frees the engine (its runner,
KV cache and graphs, kept alive before by cycles that Engine.start's gc.freeze hid from the collector), and
bench/engine/isolate.py runs a configuration in a process of its own and brings its result back."""

from __future__ import annotations

import asyncio
import os
import weakref

from bench.engine.isolate import in_child
from bench.engine.run import release
from engine_svc.serving.loader import build_engine
from tests.engine.conftest import engine_args


async def test_release_frees_the_engine_and_its_cache(tiny_model):
    loaded = build_engine(tiny_model, engine_args(), model_name="test")
    loaded.engine.start(asyncio.get_running_loop())
    runner, cache = weakref.ref(loaded.engine.runner), weakref.ref(loaded.engine.runner.kv_caches[0])
    release(loaded)
    assert runner() is None and cache() is None


def test_a_configuration_runs_in_another_process():
    assert in_child(os.getpid) != os.getpid()
