"""OpenTelemetry tracing, configured only by the standard OTEL_* environment variables.

On when OTEL_TRACES_EXPORTER lists `otlp`, or (with it unset) when OTEL_EXPORTER_OTLP_ENDPOINT or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; always off when OTEL_SDK_DISABLED=true. Off means no provider,
no exporter and no interceptor: the helpers below are then no-ops on the API's invalid span.
The OTLP protocol comes from OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL: `grpc` (default, as the Python SDK's
`otlp` exporter) or `http/protobuf`; endpoint, headers, timeout, sampler and batching come from the
exporters' and SDK's own OTEL_* variables. Prompt and completion text go into spans only when
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

INSTRUMENTATION = "scaleout"
GRPC = "grpc"
HTTP_PROTOBUF = "http/protobuf"


def _env(name: str, env: Mapping[str, str]) -> str:
    return env.get(name, "").strip()


def tracing_enabled(env: Mapping[str, str] = os.environ) -> bool:
    if _env("OTEL_SDK_DISABLED", env).lower() == "true":
        return False
    exporters = _env("OTEL_TRACES_EXPORTER", env).lower()
    if exporters:
        return "otlp" in [e.strip() for e in exporters.split(",")]
    return bool(_env("OTEL_EXPORTER_OTLP_ENDPOINT", env) or _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", env))


def otlp_protocol(env: Mapping[str, str] = os.environ) -> str:
    protocol = _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", env) or _env("OTEL_EXPORTER_OTLP_PROTOCOL", env) or GRPC
    if protocol not in (GRPC, HTTP_PROTOBUF):
        raise SystemExit(f"unsupported OTLP protocol {protocol!r}: use {GRPC} or {HTTP_PROTOBUF}")
    return protocol


def otlp_traces_endpoint(env: Mapping[str, str] = os.environ) -> tuple[str, str, int, str]:
    """(protocol, host, port, path) the exporters send spans to, resolved as the OTLP exporter spec says.

    For processes that take a collector address rather than the variables (Envoy's tracer).
    """
    protocol = otlp_protocol(env)
    http = protocol == HTTP_PROTOBUF
    url = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", env)
    if not url:
        base = _env("OTEL_EXPORTER_OTLP_ENDPOINT", env) or (
            "http://localhost:4318" if http else "http://localhost:4317"
        )
        url = base.rstrip("/") + "/v1/traces" if http else base
    parts = urlsplit(url if "://" in url else "http://" + url)
    port = parts.port or (4318 if http else 4317)
    return protocol, parts.hostname or "localhost", port, (parts.path or "/v1/traces") if http else ""


def capture_content(env: Mapping[str, str] = os.environ) -> bool:
    return _env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", env).lower() == "true"


def _exporter():
    if otlp_protocol() == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter()


def setup_tracing(default_service_name: str) -> TracerProvider | None:
    """A provider exporting over OTLP in batches, or None when tracing is off.

    The first provider of the process also becomes the global one (client channels and libraries use it);
    in-process tests that serve several services get one provider (one service.name) each.
    """
    if not tracing_enabled():
        return None
    resource = Resource.create()  # OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES win over our default
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: default_service_name}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(_exporter()))
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    return provider


def tracer_of(provider: TracerProvider | None) -> trace.Tracer | None:
    return provider.get_tracer(INSTRUMENTATION) if provider is not None else None


_service_tracer: contextvars.ContextVar[trace.Tracer | None] = contextvars.ContextVar("scaleout_tracer", default=None)


def use_service_tracer(tracer: trace.Tracer | None) -> None:
    """Called by the server bootstrap: channels opened while serving (in load() or handlers) trace as this service."""
    _service_tracer.set(tracer)


def channel_tracer() -> trace.Tracer | None:
    """The tracer for a new client channel: the serving service's, else the process's; None when tracing is off."""
    tracer = _service_tracer.get()
    if tracer is not None:
        return tracer
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider) or not tracing_enabled():
        return None
    return provider.get_tracer(INSTRUMENTATION)


# -- the current span: cheap no-ops when tracing is off (gen_ai.* attributes: genai.set_genai_attributes) --


def add_event(name: str, **attributes) -> None:
    """An event on the current span (e.g. add_event("gen_ai.first_token", queue_s=0.01))."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, attributes)


def current_ids() -> tuple[str, str] | None:
    """(trace_id, span_id) in hex of the current span, or None."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")
