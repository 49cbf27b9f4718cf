"""The grammar cache on its own, with a backend that only counts compiles: gets of a constraint that race the end
of its compile (as the step loop's do, right after the servicer's) join it or hit the cache, never compile again."""

from __future__ import annotations

import sys
import threading

from engine_svc.structured.compiler import GrammarCompiler
from engine_svc.structured.spec import Constraint


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
