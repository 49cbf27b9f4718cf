"""The grammar cache on its own, with a backend that only counts compiles: gets of a constraint that race the end
of its compile (as the step loop's do, right after the servicer's) join it or hit the cache, never compile again."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from engine_svc.structured.compiler import GrammarCompiler
from engine_svc.structured.spec import Constraint
from scaleout_common.errors import ServiceError


class CountingBackend:
    name, vocab_size = "counting", 16
    memory_size_bytes = 1  # the compiled "grammar" is the backend itself

    def __init__(self) -> None:
        self.compiles = 0

    def compile(self, constraint: Constraint):
        self.compiles += 1
        return self


def test_gets_racing_the_end_of_a_compile_never_compile_again():
    backend = CountingBackend()
    compiler = GrammarCompiler(backend, "tokenizer")  # type: ignore[arg-type]
    constraints = [Constraint("regex", f"[a-z]{{{n}}}") for n in range(1, 201)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads trade the GIL all the time: any window between two locked sections shows

    def hammer(constraint: Constraint) -> None:
        while not compiler.get(constraint).done():
            pass

    try:
        for constraint in constraints:
            threads = [threading.Thread(target=hammer, args=(constraint,)) for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(switch)
        compiler.close()
    assert backend.compiles == len(constraints) == compiler.stats.misses
    assert not compiler._running


class SleepingBackend:
    """Each constraint's text is how long it takes to compile (a sleep: the GIL is free, as in native code)."""

    name, vocab_size = "sleeping", 16
    memory_size_bytes = 1

    def compile(self, constraint: Constraint):
        time.sleep(float(constraint.text))
        return self


def test_the_bound_counts_a_compiles_own_time_not_its_queue():
    """One worker, a 0.5 s bound: three 0.3 s compiles queued behind each other are all accepted (the last waited
    0.6 s), a 0.8 s one is refused for all its waiters, and at once when asked again."""
    compiler = GrammarCompiler(SleepingBackend(), "tokenizer", timeout_s=0.5, threads=1)  # type: ignore[arg-type]
    try:
        quick = [compiler.get(Constraint("regex", f"0.3{'0' * n}")) for n in range(3)]
        slow = Constraint("regex", "0.8")
        waiters = [compiler.get(slow), compiler.get(slow)]
        for future in quick:
            future.result(timeout=5)
        for future in waiters:
            with pytest.raises(ServiceError, match=r"did not compile within"):
                future.result(timeout=5)
        assert compiler.get(slow).exception(timeout=0) is not None
    finally:
        compiler.close()
