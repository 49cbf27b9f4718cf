"""gRPC server bootstrap shared by every service.

`run(service, args)` serves `service` with: grpc.health.v1 (liveness "" and readiness per service name,
NOT_SERVING while loading and draining; scaleout_common.health), reflection v1 and v1alpha
(scaleout_common.reflection), keepalive that tolerates client pings, explicit message
size limits, typed errors, mTLS when --tls-dir is set (scaleout_common.tls, rotated live), and SIGTERM/SIGINT drain:
readiness turns NOT_SERVING at once, calls are still served for --drain-delay-s (long enough for the gateway's
health checks to take the replica out of rotation, so nothing is sent to a closing port), then new calls are
refused (UNAVAILABLE DRAINING, which the gateway retries elsewhere) and in-flight ones get --drain-grace-s. A second
SIGTERM/SIGINT ends the delay at once (nothing is left to take the replica out: the gateway has stopped too).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import os
import pkgutil
import signal
import sys
from collections.abc import Sequence
from typing import Protocol

import grpc
import uvloop
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

import scaleout.v1
from scaleout_common import identity, reflection, tls
from scaleout_common.health import HealthServicer
from scaleout_common.interceptors import ErrorInterceptor
from scaleout_common.telemetry import logs
from scaleout_common.telemetry.bootstrap import Telemetry

log = logging.getLogger(__name__)


class Service(Protocol):
    """What a service package hands to `run`."""

    @property
    def service_names(self) -> Sequence[str]:
        """Full gRPC service names, e.g. "scaleout.v1.EngineService" (a class attribute tuple satisfies it)."""
        ...

    def register(self, server: grpc.aio.Server) -> None: ...

    async def load(self) -> None:
        """Heavy start-up (model loading). Health says NOT_SERVING until it returns."""

    async def drain(self) -> None:
        """Stop taking new work; in-flight calls get --drain-grace-s to finish."""

    async def close(self) -> None: ...

    # Optional members, looked up with getattr (not declared here, so a service need not have them):
    # `healthy() -> bool`, polled while serving; False turns readiness NOT_SERVING (e.g. a stalled
    # step loop) until it returns True again.
    # `reflected_names: Sequence[str]`, more services that reflection lists besides its own (the
    # gateway sends reflection to the one-hop service, which lists `contract_service_names()`).
    # `health_elsewhere(name) -> ServingStatus | None`, awaited for a health check naming a service this server does
    # not hold (the one-hop service answers for the roles behind the gateway; None: not found).
    # `listening(port)`, called once the port is bound, before `load` (the engine's other API servers
    # listen on the same one).
    # `readiness(serving)`, called before `listening`: `serving()` says whether the gRPC health check says SERVING
    # now (a service's other faces answer their own health probes from it: render_svc/http_face.py).
    # `shares_port: bool`, True when other processes listen on this port too (SO_REUSEPORT); by default a
    # port is one server's.


def contract_service_names() -> tuple[str, ...]:
    """Every service of the generated contract, its descriptors loaded (reflection serves them from this pool)."""
    names = []
    for module in pkgutil.iter_modules(scaleout.v1.__path__):
        if module.name.endswith("_pb2"):
            descriptor = importlib.import_module(f"scaleout.v1.{module.name}").DESCRIPTOR
            names += [service.full_name for service in descriptor.services_by_name.values()]
    return tuple(sorted(names))


METADATA_BYTES = 64 * 1024


def channel_options(max_message_mb: int) -> list[tuple[str, int]]:
    size = max_message_mb * 1024 * 1024
    return [
        ("grpc.max_send_message_length", size),
        ("grpc.max_receive_message_length", size),
    ]


def server_options(max_message_mb: int, shares_port: bool = False) -> list[tuple[str, int]]:
    return channel_options(max_message_mb) + [
        # A port is one server's unless the service says otherwise: never silently share it with another
        # process (gRPC enables SO_REUSEPORT).
        ("grpc.so_reuseport", int(shares_port)),
        # Clients may ping every 10 s even with no call in flight (long prefills, idle pools) without a GOAWAY.
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.http2.max_ping_strikes", 0),
        # Every header the gateway lets through (at most its max_request_headers_kb, 32 KiB, plus its own) is
        # taken: gRPC's default refuses metadata from 8 KiB (at random, always past 16 KiB) as RESOURCE_EXHAUSTED,
        # which REST clients saw as a 429 and retried, where the gateway's own limit answers 431.
        ("grpc.max_metadata_size", METADATA_BYTES),
        ("grpc.absolute_max_metadata_size", METADATA_BYTES),
    ]


class _State:
    def __init__(self) -> None:
        self.ready = False
        self.draining = False


def configure_logging(level: str, fmt: str = "json") -> None:
    """JSON lines on stderr (trace_id/span_id inside a span); `text` for the classic one-line format."""
    logs.configure(level, fmt)


async def serve(service: Service, args, stop: asyncio.Event | None = None, listening=None) -> None:
    """Serve until SIGTERM/SIGINT (or until `stop` is set, when given: in-process tests).

    `listening(port)` is called once the port is bound, before loading starts.
    """
    state = _State()
    names = list(service.service_names)
    telemetry = Telemetry(service, names, args.metrics_port)
    interceptors = [*telemetry.interceptors(), ErrorInterceptor(lambda: state.ready, lambda: state.draining)]
    options = server_options(args.max_message_mb, getattr(service, "shares_port", False))
    server = grpc.aio.server(interceptors=interceptors, options=options)
    health_servicer = HealthServicer(getattr(service, "health_elsewhere", None))
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    service.register(server)
    reflection.enable([*names, *getattr(service, "reflected_names", ()), health.SERVICE_NAME], server)
    credentials = tls.configure(getattr(args, "tls_dir", None))
    identity.configure_forwarding(getattr(args, "forward_credentials", False))
    identity.configure_required(getattr(args, "require_identity", False))
    address = f"{args.host}:{args.port}"
    port = server.add_secure_port(address, credentials.server()) if credentials else server.add_insecure_port(address)
    if port == 0:
        raise SystemExit(f"cannot listen on {args.host}:{args.port}")
    health_only = await _plaintext_health(health_servicer, args) if credentials else None
    telemetry.bound(args.host, port)

    async def set_all(status) -> None:
        for name in ["", *names]:
            await health_servicer.set(name, status)

    await set_all(health_pb2.HealthCheckResponse.NOT_SERVING)
    await server.start()
    # Machine-readable line for launchers and tests (port 0 picks a free port).
    print(f"LISTENING {names[0]} {args.host}:{port}", flush=True)
    telemetry.start(args.host)
    if (readiness := getattr(service, "readiness", None)) is not None:
        readiness(lambda: health_servicer.serving(names[0]))
    for hook in (getattr(service, "listening", None), listening):
        if hook is not None:
            hook(port)

    hurry = asyncio.Event()
    if stop is None:
        stop = stopping = asyncio.Event()
        loop = asyncio.get_running_loop()

        def signalled() -> None:
            (hurry if stopping.is_set() else stopping).set()  # a second signal ends the drain delay, not the grace

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, signalled)

    load = asyncio.create_task(service.load())
    done, _ = await asyncio.wait([load, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
    if load in done:
        load.result()  # a failed load stops the process with its error
        # Everything loaded so far (modules, model, tokenizer: ~400k objects) lives as long as the process;
        # frozen, it is skipped by the collector, whose full passes over it stalled serving for ~0.1-0.2 s.
        gc.freeze()
        state.ready = True
        await set_all(health_pb2.HealthCheckResponse.SERVING)
        log.info("%s ready on %s:%d", names[0], args.host, port)
        watch = asyncio.create_task(_watch_health(service, names, health_servicer, state))
        await stop.wait()
        watch.cancel()

    await set_all(health_pb2.HealthCheckResponse.NOT_SERVING)
    delay = getattr(args, "drain_delay_s", 0.0) if state.ready else 0.0
    log.info(
        "draining: serving %.1fs more while the gateway sees NOT_SERVING, then grace %.0fs", delay, args.drain_grace_s
    )
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(hurry.wait(), delay)
    state.draining = True
    load.cancel()
    await service.drain()
    await server.stop(args.drain_grace_s)
    if health_only is not None:
        await health_only.stop(0)
    await service.close()
    await telemetry.close()
    log.info("stopped")


async def _plaintext_health(health_servicer, args) -> grpc.aio.Server | None:
    """grpc.health.v1 alone, without TLS, on --health-port (kubelet's gRPC probes cannot speak TLS)."""
    if getattr(args, "health_port", -1) < 0:
        return None
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if server.add_insecure_port(f"{args.host}:{args.health_port}") == 0:
        raise SystemExit(f"cannot listen on {args.host}:{args.health_port}")
    await server.start()
    return server


async def _watch_health(service, names, health_servicer, state, period_s: float = 1.0) -> None:
    """Mirror the service's optional `healthy()` into readiness (the per-service names, not liveness "")."""
    healthy = getattr(service, "healthy", None)
    if healthy is None:
        return
    serving = True
    while not state.draining:
        await asyncio.sleep(period_s)
        now = bool(healthy())
        if now != serving and not state.draining:
            serving = now
            status = health_pb2.HealthCheckResponse.SERVING if now else health_pb2.HealthCheckResponse.NOT_SERVING
            log.warning("readiness -> %s", "SERVING" if now else "NOT_SERVING")
            for name in names:
                await health_servicer.set(name, status)


def run(service: Service, args) -> None:
    configure_logging(args.log_level, args.log_format)
    # uvloop: grpc.aio drives the loop several times per call; uvloop cuts ~10% of a small unary call's server CPU.
    uvloop.run(serve(service, args))
    # Served, drained and closed: end here rather than in the interpreter's teardown, whose garbage collections over
    # the libraries' and the model's objects took 2-4 s on two cores in every stop (a rollout, a stack, a test).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
