"""Telemetry: traces, metrics and logs, applied to every service by the server bootstrap and open_channel.

The machinery here knows no service's messages:
- bootstrap: what `server.serve` calls (interceptors, the bound address, /metrics, close).
- tracing: the OTEL_* switch, the provider and its OTLP exporter, helpers on the current span.
- rpc: the server interceptor (SERVER span, RPC metrics) and the client ones (CLIENT span, traceparent).
- call_summary: one call's gen_ai.* summary (token counts, TTFT, inter-token latency, finish reasons,
  usage) onto its span and the LLM metrics; `report_engine_timing` for what only the engine knows.
- genai: the gen_ai.* names and the reader registry (`on_request`, `on_response`) through which a service
  says what its own messages mean; openai_shapes: the readers for OpenAI-shaped messages.
- metrics: Prometheus registries and metric definitions. logs: JSON log lines carrying trace ids.

Each service registers the readers of its messages in its own `telemetry` module (render_svc, derender_svc,
engine_svc.serving, pipeline_svc), imported by the module that serves them.
"""
