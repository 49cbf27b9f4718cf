"""Prometheus metrics: one registry per served service, exposed on --metrics-port.

RPC metrics (every service) are fed by the telemetry server interceptor. LLM metrics (the engine) are fed
by each Generate call's summary at the service boundary (call_summary: TTFT, inter-token latency, end to
end, tokens in and out) and by gauges that read the engine's scheduler when Prometheus scrapes (queue depth,
running sequences, KV cache use). The same observations reach the `LlmObserver`s a service adds (a face
that exports them under another project's names: engine_svc/serving/vllm_metrics/).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

# Latency buckets from 1 ms to 10 min: wide enough for RPCs, prefills and whole generations.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
TOKEN_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class RpcMetrics:
    """Requests and errors by method and code, in-flight calls and latency."""

    def __init__(self, registry: CollectorRegistry):
        self.requests = Counter(
            "scaleout_rpc_requests",
            "RPCs handled, by method and gRPC status code",
            ["method", "code"],
            registry=registry,
        )
        self.errors = Counter(
            "scaleout_rpc_errors", "RPCs that ended with a non-OK status", ["method", "code"], registry=registry
        )
        self.in_flight = Gauge("scaleout_rpc_in_flight", "RPCs being handled", ["method"], registry=registry)
        self.duration = Histogram(
            "scaleout_rpc_duration_seconds",
            "RPC latency from call start to status, by method and code",
            ["method", "code"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._children: dict[tuple[str, str], tuple] = {}
        self._in_flight: dict[str, Gauge] = {}

    def started(self, method: str) -> None:
        gauge = self._in_flight.get(method)
        if gauge is None:  # label lookups take a lock: do them once per method
            gauge = self._in_flight[method] = self.in_flight.labels(method)
        gauge.inc()

    def finished(self, method: str, code: str, seconds: float) -> None:
        self._in_flight[method].dec()
        children = self._children.get((method, code))
        if children is None:  # label lookups take a lock: do them once per (method, code)
            children = self._children[(method, code)] = (
                self.requests.labels(method, code),
                self.errors.labels(method, code) if code != "OK" else None,
                self.duration.labels(method, code),
            )
        requests, errors, duration = children
        requests.inc()
        if errors is not None:
            errors.inc()
        duration.observe(seconds)


@dataclass(slots=True)
class FinishedCall:
    """One Generate call's numbers at its end (seconds, tokens), as observers receive them."""

    e2e: float
    prompt_tokens: int
    generation_tokens: int
    finish_reasons: list[str]  # one per finished choice, by scaleout_common.finish_reasons' OpenAI names
    ttft: float | None = None  # None: no token came
    queue: float | None = None  # waiting for a slot, prefill and decode: as the engine measured them
    prefill: float | None = None
    decode: float | None = None


class LlmObserver(Protocol):
    """Another view of the engine's observations; called on the serving event loop, so it must be cheap."""

    def first_token(self, ttft: float) -> None: ...

    def token_gaps(self, gap: float, count: int) -> None:
        """`count` tokens that each came `gap` seconds after the one before."""
        ...

    def finished(self, call: FinishedCall) -> None: ...


class LlmMetrics:
    """Generation metrics of an engine: what call_summary observes, into our histograms and to the observers."""

    def __init__(self, registry: CollectorRegistry):
        self.registry = registry
        self.observers: list[LlmObserver] = []
        self.queue_depth = Gauge("scaleout_engine_queue_depth", "Requests waiting to be scheduled", registry=registry)
        self.running = Gauge("scaleout_engine_running_sequences", "Sequences in the running batch", registry=registry)
        self.kv_cache_usage = Gauge(
            "scaleout_engine_kv_cache_usage_ratio", "Fraction of KV cache blocks in use (0..1)", registry=registry
        )
        self.kv_cache_cached = Gauge(
            "scaleout_engine_kv_cache_cached_ratio",
            "Fraction of KV cache blocks holding a reusable prefix, in use or free (0..1)",
            registry=registry,
        )
        self.prefix_cache_hit = Gauge(
            "scaleout_engine_prefix_cache_hit_ratio",
            "Prompt tokens served from the prefix cache over prompt tokens admitted, since start (0..1)",
            registry=registry,
        )
        self.spec_decode_acceptance = Gauge(
            "scaleout_engine_spec_decode_acceptance_ratio",
            "Speculative decoding: draft tokens accepted over draft tokens proposed, since start (0..1)",
            registry=registry,
        )

        def histogram(name: str, doc: str, buckets=LATENCY_BUCKETS) -> Histogram:
            return Histogram(f"scaleout_engine_{name}_seconds", doc, buckets=buckets, registry=registry)

        self.queue_time = histogram("queue_time", "Time a request waited before it was scheduled (engine-reported)")
        self.time_to_first_token = histogram("time_to_first_token", "From the Generate call's start to its first token")
        self.inter_token_latency = histogram(
            "inter_token_latency",
            "Gap between output tokens (one sample per token after the first)",
            TOKEN_LATENCY_BUCKETS,
        )
        self.e2e_latency = histogram("e2e_request_latency", "From the Generate call's start to its last message")
        self.prompt_tokens = Counter("scaleout_engine_prompt_tokens", "Prompt tokens processed", registry=registry)
        self.generation_tokens = Counter("scaleout_engine_generation_tokens", "Tokens generated", registry=registry)
        self.finished_requests = Counter(
            "scaleout_engine_requests_finished",
            "Requests finished, by finish reason",
            ["finish_reason"],
            registry=registry,
        )

    def first_token(self, ttft: float) -> None:
        self.time_to_first_token.observe(ttft)
        for observer in self.observers:
            observer.first_token(ttft)

    def token_gaps(self, gap: float, count: int) -> None:
        for _ in range(count):
            self.inter_token_latency.observe(gap)
        for observer in self.observers:
            observer.token_gaps(gap, count)

    def queued(self, seconds: float) -> None:
        self.queue_time.observe(seconds)

    def finished(self, call: FinishedCall) -> None:
        self.e2e_latency.observe(call.e2e)
        self.prompt_tokens.inc(call.prompt_tokens)
        self.generation_tokens.inc(call.generation_tokens)
        for reason in call.finish_reasons:
            self.finished_requests.labels(reason).inc()
        for observer in self.observers:
            observer.finished(call)

    def watch(
        self,
        queue_depth: Callable[[], float],
        running: Callable[[], float],
        kv_cache_usage: Callable[[], float],
        kv_cache_cached: Callable[[], float] | None = None,
        prefix_cache_hit: Callable[[], float] | None = None,
        spec_decode_acceptance: Callable[[], float] | None = None,
    ) -> None:
        """Gauges read the engine's own counters at scrape time: nothing on the hot path."""
        self.queue_depth.set_function(queue_depth)
        self.running.set_function(running)
        self.kv_cache_usage.set_function(kv_cache_usage)
        if kv_cache_cached is not None:
            self.kv_cache_cached.set_function(kv_cache_cached)
        if prefix_cache_hit is not None:
            self.prefix_cache_hit.set_function(prefix_cache_hit)
        if spec_decode_acceptance is not None:
            self.spec_decode_acceptance.set_function(spec_decode_acceptance)


class ServiceMetrics:
    """The registry of one served service; `llm` exists for services that generate (the engine)."""

    def __init__(self, generates: bool):
        self.registry = CollectorRegistry()
        self.rpc = RpcMetrics(self.registry)
        self.llm = LlmMetrics(self.registry) if generates else None
        self._server = None

    def serve_http(self, host: str, port: int) -> int:
        """Start the /metrics endpoint on a daemon thread; returns the bound port (0 picks a free one)."""
        self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        return self._server.server_port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
