"""Each configuration of an in-process bench in a process of its own (bench/serving starts engines as processes
for the same reason): all an engine holds on the GPU (its KV cache, sized to the memory it finds free; fused
weight copies of a shared model; CUDA graph pools; compiled kernels; its threads' references) is returned when
its process exits, whatever still refers to it, so the next configuration finds the device as the first did.
Spawned, not forked (CUDA does not survive a fork): `fn` and its arguments are pickled, so `fn` is module-level."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Callable
from typing import Any


def in_child(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a fresh process; its result (or its exception; BrokenProcessPool if the process died)."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        return pool.submit(fn, *args).result()
