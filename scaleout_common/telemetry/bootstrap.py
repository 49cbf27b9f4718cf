"""What the server bootstrap calls for observability: interceptors(), bound(), start(), close().

Tracing per the OTEL_* environment (see tracing.py); metrics on --metrics-port (-1: off). With both off,
no interceptor is installed at all.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence

import grpc

from scaleout_common.telemetry import tracing
from scaleout_common.telemetry.metrics import ServiceMetrics
from scaleout_common.telemetry.rpc import ServerTelemetryInterceptor

ENGINE = "scaleout.v1.EngineService"


def default_service_name(grpc_name: str) -> str:
    """ "scaleout.v1.RenderService" -> "scaleout-render" (OTEL_SERVICE_NAME overrides it)."""
    return "scaleout-" + grpc_name.rsplit(".", 1)[-1].removesuffix("Service").lower()


class Telemetry:
    def __init__(self, service, names: Sequence[str], metrics_port: int):
        self._service = service
        self._names = list(names)
        self.provider = tracing.setup_tracing(default_service_name(self._names[0]))
        tracing.use_service_tracer(tracing.tracer_of(self.provider))
        self.metrics = ServiceMetrics(generates=ENGINE in self._names) if metrics_port >= 0 else None
        self._metrics_port = metrics_port
        self._interceptor = None
        if self.provider is not None or self.metrics is not None:
            self._interceptor = ServerTelemetryInterceptor(tracing.tracer_of(self.provider), self.metrics)

    def interceptors(self) -> list[grpc.aio.ServerInterceptor]:
        """Put first: the span and the clock cover the readiness gate and error mapping too."""
        return [self._interceptor] if self._interceptor is not None else []

    def bound(self, host: str, port: int) -> None:
        """The address spans report as server.address / server.port, known once the port is bound."""
        if self._interceptor is not None:
            # A wildcard bind names no server: report the machine (the pod, on Kubernetes).
            self._interceptor.set_address(socket.gethostname() if host in ("", "0.0.0.0", "::", "[::]") else host, port)

    def start(self, host: str) -> str | None:
        """Serve /metrics and print `METRICS <service> <url>` for launchers (like the LISTENING line)."""
        if self.metrics is None:
            return None
        watch = getattr(self._service, "watch_metrics", None)
        if watch is not None and self.metrics.llm is not None:
            watch(self.metrics.llm)
        port = self.metrics.serve_http(host, self._metrics_port)
        url = f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"
        print(f"METRICS {self._names[0]} {url}", flush=True)
        return url

    async def close(self) -> None:
        if self.metrics is not None:
            await asyncio.to_thread(self.metrics.close)  # the HTTP server notices shutdown within 0.5 s
        if self.provider is not None:
            await asyncio.to_thread(self.provider.shutdown)  # flushes the batch of spans still queued
