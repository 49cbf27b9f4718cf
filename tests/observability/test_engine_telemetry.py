"""The real engine (tiny random Llama) reports queue/prefill/TTFT on its spans and feeds its Prometheus metrics."""

from __future__ import annotations

import grpc

from engine_svc.__main__ import make_parser
from engine_svc.serving.loader import build_engine
from engine_svc.serving.service import EngineService
from scaleout.v1 import engine_pb2_grpc
from tests.engine.conftest import request, tiny_model  # noqa: F401  (fixture)
from tests.observability.otlp_receiver import OtlpReceiver
from tests.observability.test_plumbing import scrape
from tests.observability.toy import serving

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PROMPT = [1, 5, 6, 7, 8, 9]
NEW_TOKENS = 6


def _engine(model) -> EngineService:
    args = make_parser().parse_args(["--block-size", "4"])
    return EngineService(args, build=lambda: build_engine(model, args, model_name="tiny", tokenizer_fingerprint=""))


async def test_engine_spans_and_metrics(tiny_model, monkeypatch):  # noqa: F811
    with OtlpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        service = _engine(tiny_model)
        async with serving(service, metrics=True) as served:
            before = scrape(served.metrics_url)
            async with grpc.aio.insecure_channel(served.target) as channel:
                stub = engine_pb2_grpc.EngineServiceStub(channel)
                message = request(PROMPT, "traced", temperature=0, max_tokens=NEW_TOKENS, ignore_eos=True)
                metadata = [("traceparent", f"00-{TRACE_ID}-00f067aa0ba902b7-01")]
                streamed = [m async for m in stub.Generate(message, metadata=metadata)]
                whole = await stub.GenerateUnary(request(PROMPT, temperature=0, max_tokens=NEW_TOKENS, ignore_eos=True))
            after = scrape(served.metrics_url)
        spans = receiver.spans(TRACE_ID)

    assert streamed[-1].usage.completion_tokens == whole.usage.completion_tokens == NEW_TOKENS
    (span,) = spans
    attributes = span.attributes
    assert attributes["gen_ai.usage.input_tokens"] == len(PROMPT)
    assert attributes["gen_ai.usage.output_tokens"] == NEW_TOKENS
    assert attributes["gen_ai.request.max_tokens"] == NEW_TOKENS and attributes["gen_ai.request.temperature"] == 0
    assert attributes["gen_ai.response.finish_reasons"] == ["length"]
    assert attributes["gen_ai.response.id"] == "traced"
    queue, prefill = attributes["gen_ai.latency.time_in_queue"], attributes["gen_ai.latency.time_in_model_prefill"]
    ttft, e2e = attributes["gen_ai.latency.time_to_first_token"], attributes["gen_ai.latency.e2e"]
    assert queue >= 0 and prefill > 0 and queue + prefill <= ttft <= e2e
    decode = attributes["gen_ai.latency.time_in_model_decode"]  # the engine's: a stream may carry tokens together
    assert decode > 0 and queue + prefill + decode <= e2e

    def moved(name):
        return after.get((name, ()), 0) - before.get((name, ()), 0)

    assert moved("scaleout_engine_time_to_first_token_seconds_count") == 2
    assert moved("scaleout_engine_queue_time_seconds_count") == 2
    assert moved("scaleout_engine_inter_token_latency_seconds_count") == 2 * (NEW_TOKENS - 1)
    assert moved("scaleout_engine_e2e_request_latency_seconds_count") == 2
    assert moved("scaleout_engine_prompt_tokens_total") == 2 * len(PROMPT)
    assert moved("scaleout_engine_generation_tokens_total") == 2 * NEW_TOKENS
    # Idle again: nothing waits or runs, every KV block is back.
    assert after[("scaleout_engine_queue_depth", ())] == 0
    assert after[("scaleout_engine_running_sequences", ())] == 0
    assert after[("scaleout_engine_kv_cache_usage_ratio", ())] == 0
