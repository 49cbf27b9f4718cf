"""Request-supplied chat templates run in worker processes: an address-space rlimit, a CPU rlimit, a hard kill.

Jinja's sandbox stops attribute escapes, not resource use, and counting allocations from inside it never ends
(`~` doubling a string, `'{:>1000000000}'.format(1)`, `7 ** 99999999` computed while holding the GIL, so that
no thread of the server runs until it is done). So a request template is compiled and rendered only in a
worker process, which limits itself at start:
- memory: RLIMIT_AS = its size after start-up + `memory_mb`, so an oversized value raises MemoryError there;
- CPU: before each call RLIMIT_CPU = the CPU time used so far + the deadline + 1 s (SIGXCPU), a backstop should
  the server not kill it (the kill is by wall clock, which a busy machine reaches first);
- time: the caller waits on the pipe, without the GIL, and SIGKILLs the worker at the deadline.

Outcomes: the worker's own typed error (TEMPLATE_ERROR, the output cap's TEMPLATE_OUTPUT_TOO_LARGE, a caught
MemoryError as TEMPLATE_OUTPUT_TOO_LARGE); the deadline or SIGXCPU: TEMPLATE_TIMEOUT; any other death (memory
exhausted inside C code, the kernel's OOM killer): TEMPLATE_OUTPUT_TOO_LARGE. A worker that was killed, died or
ran out of memory is replaced by a fresh one on next use.

Workers fork from multiprocessing's forkserver, which imports the template code once (`preload`): a fresh worker
is ready in ~20 ms. (So, as with any forkserver or spawn use, a script that starts a pool imports its work under
`if __name__ == "__main__":`.) Calls and replies are JSON: the reply comes from a process that ran the caller's code, so
the server never unpickles it, and reads at most `max_reply_bytes` of it.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import queue
import resource
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

STARTUP_S = 60.0  # a worker's start-up: the forkserver's first start imports transformers (~1 s on a busy VM)
_READY = b"ready"


def _limit(kind: int, soft: int) -> None:
    hard = resource.getrlimit(kind)[1]
    resource.setrlimit(kind, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _serve(conn: Connection, setup: Callable[[], Callable[[list], object]], memory_bytes: int, cpu_s: int) -> None:
    """The worker: limit itself, then answer calls until the server closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group; the server stops us
    handle = setup()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU would dump a core
    try:
        with open("/proc/self/statm") as statm:
            _limit(resource.RLIMIT_AS, int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") + memory_bytes)
    except FileNotFoundError:  # not Linux: time is still bounded
        pass
    conn.send_bytes(_READY)
    while True:
        try:
            call = json.loads(conn.recv_bytes())
        except EOFError:  # the server closed the pipe, or exited
            return
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _limit(resource.RLIMIT_CPU, math.ceil(usage.ru_utime + usage.ru_stime) + cpu_s)
        try:
            reply = ["ok", handle(call)]
        except ServiceError as error:
            reply = ["error", error.reason, error.message, error.violations[0][0] if error.violations else None]
        conn.send_bytes(json.dumps(reply).encode())


@dataclass(eq=False)
class _Worker:
    process: BaseProcess
    conn: Connection

    def stop(self) -> None:
        if self.process.exitcode is None:
            self.process.kill()
        self.process.join()
        self.conn.close()


class SandboxPool:
    """Up to `workers` worker processes, each started on first use, that run `setup()`'s handler on JSON calls."""

    def __init__(
        self,
        setup: Callable[[], Callable[[list], object]],
        *,
        preload: str,
        workers: int,
        timeout_s: float,
        memory_mb: int,
        max_reply_bytes: int,
    ):
        self.setup, self.preload = setup, preload
        self.timeout_s, self.memory_bytes, self.max_reply_bytes = timeout_s, memory_mb << 20, max_reply_bytes
        self._context = multiprocessing.get_context("forkserver")
        self._idle: queue.SimpleQueue[_Worker | None] = queue.SimpleQueue()  # None: a slot to start a worker in
        for _ in range(workers):
            self._idle.put(None)
        self._live: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False

    def call(self, request: list) -> Any:
        """The handler's JSON answer to `request` from a worker (blocks this thread, without the GIL, meanwhile)."""
        worker, healthy = self._idle.get(), False
        try:
            if self._closed:
                raise fail(Reason.DRAINING, "the server is shutting down")
            if worker is not None and worker.process.exitcode is not None:  # died while idle (the OOM killer)
                self._retire(worker)
                worker = None
            worker = worker or self._start()
            status, *reply = self._exchange(worker, request)
            # a MemoryError may leave the worker's heap fragmented: start afresh after one
            healthy = (status == "ok" or reply[0] != Reason.TEMPLATE_OUTPUT_TOO_LARGE) and not self._closed
        finally:
            if worker is not None and not healthy:
                self._retire(worker)
            self._idle.put(worker if healthy else None)
        if status == "ok":
            return reply[0]
        reason, message, field = reply
        raise fail(Reason(reason), message, field)

    def warm(self) -> None:
        """Start a worker now (the first also starts the forkserver, ~1 s) rather than in the first request."""
        worker = self._idle.get()
        try:
            worker = worker or self._start()
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        """Kill every worker; calls waiting for one are refused."""
        with self._lock:
            self._closed, live = True, list(self._live)
        for worker in live:
            worker.process.kill()

    def _start(self) -> _Worker:
        # Takes effect when the forkserver first starts. "__main__" as well: a worker then finds it imported
        # instead of running the server's entry script again (multiprocessing's spawn semantics).
        self._context.set_forkserver_preload(["__main__", self.preload])
        conn, child = self._context.Pipe()
        cpu_s = math.ceil(self.timeout_s) + 1
        process = self._context.Process(
            target=_serve, args=(child, self.setup, self.memory_bytes, cpu_s), name="template-sandbox", daemon=True
        )
        process.start()
        child.close()
        worker = _Worker(process, conn)
        with self._lock:
            self._live.add(worker)
        try:
            if conn.poll(STARTUP_S) and conn.recv_bytes() == _READY:
                return worker
        except EOFError:
            pass
        self._retire(worker)
        raise RuntimeError(f"a template sandbox worker did not start (exit code {process.exitcode})")

    def _retire(self, worker: _Worker) -> None:
        with self._lock:
            self._live.discard(worker)
        worker.stop()

    def _exchange(self, worker: _Worker, request: list) -> list:
        """The worker's reply (["ok", value] or ["error", reason, message, field]), or the typed error of its end."""
        conn, data = worker.conn, json.dumps(request).encode()
        try:
            conn.send_bytes(data)
            if not conn.poll(self.timeout_s):
                raise fail(Reason.TEMPLATE_TIMEOUT, f"the template ran longer than {self.timeout_s:g} s")
            return json.loads(conn.recv_bytes(self.max_reply_bytes))
        except (EOFError, OSError):  # it died (OSError: a broken pipe, or a reply above max_reply_bytes)
            worker.stop()
        if worker.process.exitcode == -signal.SIGXCPU:
            raise fail(Reason.TEMPLATE_TIMEOUT, f"the template used more than {self.timeout_s:g} s of CPU")
        raise fail(
            Reason.TEMPLATE_OUTPUT_TOO_LARGE,
            f"the template exhausted its memory (its worker ended with exit code {worker.process.exitcode})",
        )
