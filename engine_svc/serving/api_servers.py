"""More API servers over one engine core (`--api-servers N`, as vLLM's API-server count).

One Python process takes new gRPC calls one at a time on its event loop: a burst of 32 new calls (the turns of
a multi-turn closed loop, a router's wave) waits ~4-10 ms for the last of them to reach its handler while the
core idles. With N API servers, N processes listen on the engine's one port (SO_REUSEPORT: the kernel deals
each new connection to one of them) and share the core, each over its own pipes; the first starts the core and
the others, and its SIGTERM drains them all before the core stops. The other servers take no health port, and
their metrics ports follow the first's (+1, +2, ... when set; free ones when 0).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class ApiServers:
    """The other API servers of this engine, started by the first."""

    processes: list = field(default_factory=list)

    @classmethod
    def start(cls, args, pipes: list[tuple], port: int) -> ApiServers:
        """One process per (commands, results) pair, each serving `port`; returns once all of them are ready."""
        context = multiprocessing.get_context("spawn")
        started = cls()
        readies = []
        for index, (commands, results) in enumerate(pipes, start=1):
            ready = context.Event()
            process = context.Process(
                target=_serve, args=(args, index, port, commands, results, ready), name=f"api-server-{index}"
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


def _serve(args, index: int, port: int, commands, results, ready) -> None:
    from engine_svc.serving.service import EngineService  # the child's imports, after spawn
    from scaleout_common.server import run

    args.port = port
    args.health_port = -1
    if args.metrics_port > 0:
        args.metrics_port += index
    run(EngineService(args, attach=(commands, results, ready)), args)
