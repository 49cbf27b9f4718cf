"""Compiled grammars, cached by (constraint, tokenizer) and compiled on worker threads under a time bound.

`get` answers at once from the cache, joins a compile already running for the same constraint (a schema sent
by a hundred requests compiles once, its waiters share the outcome), or starts one on the pool. The compile
itself runs in the backend's native code, which releases the GIL: the step loop and the event loop keep
running. The time bound (`timeout_s`) counts the compile's own running time, from when a worker starts it,
never the time it queued behind other compiles: whether a constraint is accepted does not depend on other
requests. Once it has run `timeout_s`, its future fails with GRAMMAR_TOO_COMPLEX for every waiter and the
constraint is remembered, so it is refused at once afterwards (the native compile cannot be stopped; it
finishes on its worker and is dropped). The cache is an LRU bounded in bytes (the backend reports each
grammar's size).

A constraint whose output is a list (`Constraint.items`) also needs the vocabulary as its item budget reads it
(`ItemVocab`, items.py: ~0.1 s over a 49k vocabulary). It is built on the same pool, beside the grammar's compile,
and kept per list form (the last ITEM_VOCABS; render sends two) whether grammars are cached or not: `get`'s future
is done once both are, so the step loop finds it built.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from dataclasses import dataclass, field

from engine_svc.structured.backend import CompiledGrammar, GrammarBackend, GrammarError
from engine_svc.structured.items import ItemVocab
from engine_svc.structured.spec import Constraint, ItemList
from scaleout_common import structured_output_rules as rules
from scaleout_common.reasons import Reason, fail

log = logging.getLogger(__name__)

MAX_REMEMBERED_FAILURES = 1024
ITEM_VOCABS = 8  # item lists' vocabularies kept


@dataclass
class CompileStats:
    hits: int = 0
    misses: int = 0
    compile_seconds: list[float] = field(default_factory=list)  # of the last compiles (bounded)


def too_slow(constraint: Constraint, timeout_s: float):
    return fail(
        Reason.GRAMMAR_TOO_COMPLEX,
        f"the {constraint.describe()} did not compile within {timeout_s:g} s; simplify it",
        f"{rules.FIELD}.{constraint.kind}",
    )


class GrammarCompiler:
    def __init__(
        self,
        backend: GrammarBackend,
        tokenizer_key: str,
        *,
        timeout_s: float = rules.COMPILE_TIMEOUT_S,
        max_grammar_bytes: int = rules.MAX_GRAMMAR_BYTES,
        cache_bytes: int = 512 << 20,
        threads: int = 2,
        cache: bool = True,
    ):
        self.backend = backend
        self.tokenizer_key = tokenizer_key  # the tokenizer's fingerprint: half of every cache key
        self.timeout_s = timeout_s
        self.max_grammar_bytes = max_grammar_bytes
        self.cache_bytes = cache_bytes
        self.use_cache = cache
        self.stats = CompileStats()
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="grammar-compile")
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], tuple[CompiledGrammar, int]] = OrderedDict()
        self._bytes = 0
        self._running: dict[tuple[str, str], Future] = {}
        self._too_slow: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._vocabs: OrderedDict[tuple[ItemList, str], Future] = OrderedDict()  # built or building

    def key(self, constraint: Constraint) -> tuple[str, str]:
        return constraint.key, self.tokenizer_key

    def get(self, constraint: Constraint) -> Future:
        """A future of the compiled grammar (done at once on a cache hit); its exception is a ServiceError. For a
        list, done once its `item_vocab` is built too."""
        grammar = self._grammar(constraint)
        return grammar if constraint.items is None else _joined(grammar, self.item_vocab(constraint.items))

    def item_vocab(self, items: ItemList) -> Future:
        """A future of the vocabulary as an item budget reads it for `items` (done at once when kept)."""
        key = (items, self.tokenizer_key)
        with self._lock:
            vocab = self._vocabs.get(key)
            if vocab is not None:
                self._vocabs.move_to_end(key)
                return vocab
            vocab = self._vocabs[key] = Future()
            if len(self._vocabs) > ITEM_VOCABS:
                self._vocabs.popitem(last=False)
            self._pool.submit(self._build_vocab, key, vocab)
            return vocab

    def _build_vocab(self, key, future: Future) -> None:
        try:
            _settle(future, result=ItemVocab(self.backend.token_bytes(), key[0]))
        except BaseException as error:
            with self._lock:
                if self._vocabs.get(key) is future:
                    del self._vocabs[key]
            _settle(future, error=error)

    def _grammar(self, constraint: Constraint) -> Future:
        key = self.key(constraint)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self.stats.hits += 1
                return _done(hit[0])
            if key in self._too_slow:
                return _failed(too_slow(constraint, self.timeout_s))
            running = self._running.get(key)
            if running is not None:
                return running
            self.stats.misses += 1
            future: Future = Future()
            self._running[key] = future
            self._pool.submit(self._compile, key, constraint, future)
            return future

    def cached(self, constraint: Constraint) -> CompiledGrammar | None:
        with self._lock:
            hit = self._cache.get(self.key(constraint))
            return None if hit is None else hit[0]

    def _compile(self, key, constraint: Constraint, future: Future) -> None:
        timer = threading.Timer(self.timeout_s, self._overdue, (key, constraint, future))
        timer.daemon = True
        timer.start()
        start = time.perf_counter()
        try:
            grammar = self.backend.compile(constraint)
        except BaseException as error:
            timer.cancel()
            with self._lock:
                self._running.pop(key, None)
            if isinstance(error, GrammarError):
                error = fail(Reason.INVALID_GRAMMAR, str(error), f"{rules.FIELD}.{constraint.kind}")
            _settle(future, error=error)
            return
        timer.cancel()
        elapsed = time.perf_counter() - start
        with self._lock:
            # Leaves the running table in the same critical section as it enters the cache (or the too-slow list):
            # a get() between the two would have found neither and compiled the constraint again.
            self._running.pop(key, None)
            self.stats.compile_seconds = [*self.stats.compile_seconds[-1023:], elapsed]
            if elapsed > self.timeout_s:
                log.warning(
                    "%s took %.1f s to compile (bound %.1f s): refused from now on",
                    constraint.describe(),
                    elapsed,
                    self.timeout_s,
                )
                self._remember_too_slow(key)
            elif self.use_cache:
                size = max(int(grammar.memory_size_bytes), 1)
                self._cache[key] = (grammar, size)
                self._bytes += size
                while self._bytes > self.cache_bytes and len(self._cache) > 1:
                    _, (_, evicted) = self._cache.popitem(last=False)
                    self._bytes -= evicted
        if elapsed > self.timeout_s:
            _settle(future, error=too_slow(constraint, self.timeout_s))
        else:
            _settle(future, result=grammar)

    def _overdue(self, key, constraint: Constraint, future: Future) -> None:
        """The compile has run `timeout_s` of its own time: its waiters are refused now."""
        with self._lock:
            if future.done():
                return
            if self._running.get(key) is future:
                del self._running[key]
            self._remember_too_slow(key)
        _settle(future, error=too_slow(constraint, self.timeout_s))

    def _remember_too_slow(self, key) -> None:
        self._too_slow[key] = None
        while len(self._too_slow) > MAX_REMEMBERED_FAILURES:
            self._too_slow.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._bytes = 0

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


async def wait_compiled(compiled: Future) -> None:
    """Wait (on the event loop) for a compile; its ServiceError (GRAMMAR_TOO_COMPLEX once it has run its bound)."""
    await asyncio.wrap_future(compiled)


def _settle(future: Future, result=None, error: BaseException | None = None) -> None:
    """Resolve `future` unless the time bound already did."""
    try:
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)
    except InvalidStateError:
        pass


def _joined(first: Future, second: Future) -> Future:
    """`first`'s outcome once `second` is done too (at once if `first` fails; `second`'s error if only it does)."""
    if first.done() and second.done() and second.exception() is None:
        return first
    joined: Future = Future()

    def settle(_) -> None:
        if first.done() and (first.exception() is not None or second.done()):
            error = first.exception() or second.exception()
            _settle(joined, result=None if error else first.result(), error=error)

    first.add_done_callback(settle)
    second.add_done_callback(settle)
    return joined


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def _failed(error: BaseException) -> Future:
    future: Future = Future()
    future.set_exception(error)
    return future
