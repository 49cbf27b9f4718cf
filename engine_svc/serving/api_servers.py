"""More API servers over one engine core (`--api-servers N`, as vLLM's API-server count).

One Python process takes every new gRPC call and writes every stream's messages on one event loop; at hundreds
of streams that loop, not the GPU, sets the pace (Llama-1B shape, 128 / 128 at 256 streams on an H200: 43.3k
output tok/s with one server, 59.6k with four; bench/serving/README.md). With N API servers, N processes listen
on the engine's one port (SO_REUSEPORT: the kernel deals each new connection to one of them) and share the core,
each over its own pipes; the first starts the core and the others, and its SIGTERM drains them all before the
core stops (the others drain by themselves if it is killed outright). The other servers take no health port,
and their metrics ports follow the first's (+1, +2, ... when set; free ones when 0).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class ApiServers:
    """The other API servers of this engine, started by the first."""

    processes: list = field(default_factory=list)

    @classmethod
    def start(cls, args, pipes: list[tuple], port: int, tallies=None) -> ApiServers:
        """One process per (commands, results) pair, each serving `port`; returns once all of them are ready.
        `tallies`: the first's shared metric tallies (vllm_metrics/), a row each."""
        context = multiprocessing.get_context("spawn")
        started = cls()
        readies = []
        for index, (commands, results) in enumerate(pipes, start=1):
            ready = context.Event()
            process = context.Process(
                target=_serve,
                args=(args, index, port, commands, results, ready, tallies),
                name=f"api-server-{index}",
            )
            process.start()
            commands.close()
            results.close()
            started.processes.append(process)
            readies.append(ready)
        for process, ready in zip(started.processes, readies, strict=True):
            while not ready.wait(1.0):
                if not process.is_alive():
                    started.stop(0)
                    raise RuntimeError(f"{process.name} exited while starting (exit code {process.exitcode})")
        return started

    def drain(self) -> None:
        """SIGTERM: each drains as the first does (readiness off, delay, grace for its in-flight calls)."""
        for process in self.processes:
            if process.is_alive():
                os.kill(process.pid, signal.SIGTERM)

    def stop(self, within_s: float) -> None:
        """Wait for them to end (their in-flight calls finish first), killing any still running after `within_s`."""
        for process in self.processes:
            process.join(within_s)
            if process.is_alive():
                log.warning("%s still running after %.0f s: killed", process.name, within_s)
                process.kill()
                process.join()


def _serve(args, index: int, port: int, commands, results, ready, tallies) -> None:
    from engine_svc.serving.service import EngineService  # the child's imports, after spawn
    from scaleout_common.server import run

    threading.Thread(target=_drain_when_orphaned, args=(os.getppid(),), daemon=True).start()
    args.port = port
    args.health_port = -1
    if args.metrics_port > 0:
        args.metrics_port += index
    run(EngineService(args, attach=(commands, results, ready), tallies=(tallies, index)), args)


def _drain_when_orphaned(parent: int) -> None:
    """A first server killed outright (SIGKILL, OOM) leaves no one to stop this one: drain as on its SIGTERM."""
    while os.getppid() == parent:
        time.sleep(1.0)
    log.warning("the first API server is gone: draining")
    os.kill(os.getpid(), signal.SIGTERM)
