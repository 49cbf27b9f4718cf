"""The shared telemetry plumbing on two in-process services: spans, propagation, metrics, logs, on/off switch."""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.request

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from scaleout.v1 import chat_pb2_grpc, engine_pb2, engine_pb2_grpc, render_pb2
from scaleout_common.telemetry import genai, logs, tracing
from scaleout_common.telemetry.bootstrap import Telemetry
from tests.observability.otlp_receiver import OtlpHttpReceiver, OtlpReceiver
from tests.observability.toy import OUTPUT, ToyEngine, ToyFront, serving

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"
CHAT = render_pb2.RenderChatRequest(model="toy-model", max_tokens=5, temperature=0.5, messages=[{"role": "user"}])


@pytest.fixture
def receiver(monkeypatch):
    with OtlpReceiver() as running:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", running.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        yield running


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def _chat(front, request=CHAT, metadata=()):
    async with grpc.aio.insecure_channel(front.target) as channel:
        return await chat_pb2_grpc.ChatServiceStub(channel).CreateChatCompletion(request, metadata=metadata)


@pytest.mark.parametrize(
    "env,on",
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_tracing_switch_follows_the_standard_environment(env, on):
    assert tracing.tracing_enabled(env) is on


def test_protocol_comes_from_the_environment():
    assert tracing.otlp_protocol({}) == "grpc"
    assert tracing.otlp_protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}) == "http/protobuf"
    assert (
        tracing.otlp_protocol(
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}
        )
        == "grpc"
    )


async def test_one_trace_across_hops_with_rpc_and_genai_attributes(receiver):
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(json.loads(logs.JsonFormatter().format(record)))
    toy_log = logging.getLogger("toy")
    toy_log.addHandler(handler)
    toy_log.setLevel(logging.INFO)
    try:
        async with serving(ToyEngine()) as engine, serving(ToyFront(engine.target)) as front:
            await _chat(front, metadata=[("traceparent", TRACEPARENT)])
    finally:
        toy_log.removeHandler(handler)
        toy_log.setLevel(logging.NOTSET)
    # Both services have shut down: their batches are flushed.
    spans = receiver.spans(TRACE_ID)
    by_kind = {(s.kind, s.name): s for s in spans}
    chat = by_kind["server", "scaleout.v1.ChatService/CreateChatCompletion"]
    client = by_kind["client", "scaleout.v1.EngineService/Generate"]
    generate = by_kind["server", "scaleout.v1.EngineService/Generate"]
    assert len(spans) == 3
    assert chat.parent_span_id == "b7ad6b7169203331"
    assert client.parent_span_id == chat.span_id and generate.parent_span_id == client.span_id
    assert chat.service == client.service == "scaleout-chat" and generate.service == "scaleout-engine"
    engine_port = int(engine.target.rsplit(":", 1)[1])
    for span in (client, generate):
        assert span.attributes["rpc.system.name"] == "grpc"
        assert span.attributes["rpc.method"] == "scaleout.v1.EngineService/Generate"
        assert span.attributes["rpc.response.status_code"] == "OK"
        assert (span.attributes["server.address"], span.attributes["server.port"]) == ("127.0.0.1", engine_port)
        assert "error.type" not in span.attributes
    tokens = sum(map(len, OUTPUT))
    assert chat.attributes["gen_ai.request.model"] == "toy-model"
    assert chat.attributes["gen_ai.request.max_tokens"] == 5
    assert chat.attributes["gen_ai.request.temperature"] == 0.5
    assert chat.attributes["gen_ai.usage.output_tokens"] == tokens
    assert chat.attributes["gen_ai.response.id"] == "chatcmpl-7"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["length"]
    assert generate.attributes["gen_ai.usage.input_tokens"] == 3
    assert generate.attributes["gen_ai.usage.output_tokens"] == tokens
    assert generate.attributes["gen_ai.response.id"] == "gen-7"
    assert generate.attributes["gen_ai.latency.time_in_queue"] == 0.01
    assert generate.attributes["gen_ai.latency.time_in_model_prefill"] == 0.02
    ttft, decode = (
        generate.attributes["gen_ai.latency.time_to_first_token"],
        generate.attributes["gen_ai.latency.time_in_model_decode"],
    )
    assert ttft > 0 and 0 < decode <= generate.attributes["gen_ai.latency.e2e"]
    assert "gen_ai.first_token" in generate.events
    # The engine handler's log line carries its span's ids.
    assert [(line["trace_id"], line["span_id"]) for line in lines] == [(TRACE_ID, generate.span_id)]
    assert not any("content" in key or "prompt" in key for s in spans for key in s.attributes)


async def test_failed_call_records_the_status_as_the_conventions_say(receiver):
    async with serving(ToyEngine()) as engine, serving(ToyFront(engine.target)) as front:
        with pytest.raises(grpc.aio.AioRpcError):
            await _chat(front, render_pb2.RenderChatRequest(model="m"), metadata=[("traceparent", TRACEPARENT)])
    by_kind = {(s.kind, s.name): s for s in receiver.spans(TRACE_ID)}
    client = by_kind["client", "scaleout.v1.EngineService/Generate"]
    generate = by_kind["server", "scaleout.v1.EngineService/Generate"]
    # A caller's bad input: an error for the client, not for the server (gRPC semantic conventions).
    assert client.attributes["rpc.response.status_code"] == "INVALID_ARGUMENT"
    assert client.attributes["error.type"] == "INVALID_ARGUMENT" and client.status_code == 2
    assert generate.attributes["rpc.response.status_code"] == "INVALID_ARGUMENT"
    assert "error.type" not in generate.attributes and generate.status_code == 0


async def test_tracing_off_installs_nothing(monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    engine = ToyEngine()
    async with serving(engine) as served:
        front = ToyFront(served.target)
        async with serving(front) as front_served:
            assert front.channel._unary_stream_interceptors == []
            await _chat(front_served, metadata=[("traceparent", TRACEPARENT)])


async def test_metrics_move_by_the_right_amounts():
    engine = ToyEngine()
    async with serving(engine, metrics=True) as served, serving(ToyFront(served.target), metrics=True) as front:
        before, front_before = scrape(served.metrics_url), scrape(front.metrics_url)
        engine.waiting, engine.running = 3, 2
        await _chat(front)
        await _chat(front)
        with pytest.raises(grpc.aio.AioRpcError):
            await _chat(front, render_pb2.RenderChatRequest())
        async with grpc.aio.insecure_channel(served.target) as channel:
            whole = await engine_pb2_grpc.EngineServiceStub(channel).GenerateUnary(
                engine_pb2.GenerateRequest(token_ids=[1, 2])
            )
        after, front_after = scrape(served.metrics_url), scrape(front.metrics_url)

    def moved(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    method = "scaleout.v1.EngineService/Generate"
    tokens = sum(map(len, OUTPUT))
    assert moved("scaleout_rpc_requests_total", method=method, code="OK") == 2
    assert moved("scaleout_rpc_requests_total", method=method, code="INVALID_ARGUMENT") == 1
    assert moved("scaleout_rpc_errors_total", method=method, code="INVALID_ARGUMENT") == 1
    assert moved("scaleout_rpc_errors_total", method=method, code="OK") == 0
    assert moved("scaleout_rpc_duration_seconds_count", method=method, code="OK") == 2
    assert after[("scaleout_rpc_in_flight", (("method", method),))] == 0
    # Two streamed Generate calls (from the front) and one GenerateUnary (engine-reported first token).
    assert whole.usage.completion_tokens == tokens
    assert moved("scaleout_rpc_requests_total", method="scaleout.v1.EngineService/GenerateUnary", code="OK") == 1
    assert moved("scaleout_engine_prompt_tokens_total") == 2 * 3 + 2
    assert moved("scaleout_engine_generation_tokens_total") == 3 * tokens
    assert moved("scaleout_engine_time_to_first_token_seconds_count") == 3
    # One observation per token after the first (the last streamed message carries two tokens).
    assert moved("scaleout_engine_inter_token_latency_seconds_count") == 3 * (tokens - 1)
    assert moved("scaleout_engine_e2e_request_latency_seconds_count") == 3
    assert moved("scaleout_engine_queue_time_seconds_count") == 3
    assert moved("scaleout_engine_requests_finished_total", finish_reason="length") == 3
    assert after[("scaleout_engine_queue_depth", ())] == 3
    assert after[("scaleout_engine_running_sequences", ())] == 2
    assert after[("scaleout_engine_kv_cache_usage_ratio", ())] == 0.25
    chat = "scaleout.v1.ChatService/CreateChatCompletion"
    assert (
        front_after[("scaleout_rpc_requests_total", (("code", "OK"), ("method", chat)))]
        - front_before.get(("scaleout_rpc_requests_total", (("code", "OK"), ("method", chat))), 0)
        == 2
    )
    assert not any(name.startswith("scaleout_engine_") for name, _ in front_after)  # LLM metrics: engine only


def test_json_logs_carry_the_current_trace_ids():
    from opentelemetry.sdk.trace import TracerProvider

    formatter = logs.JsonFormatter("scaleout-test")
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello %s", ("there",), None)
    assert "trace_id" not in json.loads(formatter.format(record))
    with TracerProvider().get_tracer("t").start_as_current_span("s") as span:
        entry = json.loads(formatter.format(record))
        context = span.get_span_context()
    assert entry["message"] == "hello there" and entry["service"] == "scaleout-test"
    assert entry["trace_id"] == format(context.trace_id, "032x")
    assert entry["span_id"] == format(context.span_id, "016x")


async def test_message_text_only_when_capture_is_switched_on(receiver, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    async with serving(ToyEngine()) as engine, serving(ToyFront(engine.target)) as front:
        await _chat(front, metadata=[("traceparent", TRACEPARENT)])
    (chat,) = [s for s in receiver.spans(TRACE_ID) if s.name.startswith("scaleout.v1.ChatService")]
    assert json.loads(chat.attributes["gen_ai.input.messages"]) == [{"role": "user"}]
    assert json.loads(chat.attributes["gen_ai.output.messages"])[0]["content"] == "11 12 13 14"


async def test_otlp_over_http(monkeypatch):
    with OtlpHttpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        async with serving(ToyEngine()) as engine, serving(ToyFront(engine.target)) as front:
            await _chat(front, metadata=[("traceparent", TRACEPARENT)])
        assert {s.service for s in receiver.spans(TRACE_ID)} == {"scaleout-chat", "scaleout-engine"}
        assert len(receiver.spans(TRACE_ID)) == 3


def test_everything_off_means_no_interceptor(monkeypatch):
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    telemetry = Telemetry(ToyEngine(), ["scaleout.v1.EngineService"], metrics_port=-1)
    assert telemetry.provider is None and telemetry.metrics is None and telemetry.interceptors() == []


@pytest.mark.parametrize(
    "env,name",
    [
        ({}, "scaleout-x"),
        ({"OTEL_SERVICE_NAME": "custom"}, "custom"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=res,team=a"}, "res"),
    ],
)
def test_service_name_defaults_unless_the_environment_names_it(monkeypatch, env, name):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    provider = tracing.setup_tracing("scaleout-x")
    try:
        assert provider.resource.attributes["service.name"] == name
    finally:
        provider.shutdown()


async def test_a_cancelled_stream_ends_its_span_and_leaves_nothing_in_flight(receiver):
    method = "scaleout.v1.EngineService/Generate"
    cancelled = ("scaleout_rpc_requests_total", (("code", "CANCELLED"), ("method", method)))
    async with serving(ToyEngine(), metrics=True) as served, grpc.aio.insecure_channel(served.target) as channel:
        call = engine_pb2_grpc.EngineServiceStub(channel).Generate(
            engine_pb2.GenerateRequest(token_ids=[1]), metadata=[("traceparent", TRACEPARENT)]
        )
        await call.read()
        call.cancel()
        while cancelled not in (after := scrape(served.metrics_url)):
            await asyncio.sleep(0.02)
    assert after[cancelled] == 1
    assert after[("scaleout_rpc_in_flight", (("method", method),))] == 0
    (span,) = receiver.spans(TRACE_ID)
    assert span.attributes["rpc.response.status_code"] == "CANCELLED"


def test_genai_helpers_act_on_the_current_span_and_are_no_ops_without_one():
    from opentelemetry.sdk.trace import TracerProvider

    genai.set_genai_attributes(request_model="m")  # no span: nothing happens
    tracing.add_event("nothing")
    with TracerProvider().get_tracer("t").start_as_current_span("s") as span:
        genai.set_genai_attributes(request_model="m", max_tokens=8, finish_reasons=("stop",), seed=None)
        tracing.add_event("gen_ai.custom", tokens=3)
    assert dict(span.attributes) == {
        "gen_ai.request.model": "m",
        "gen_ai.request.max_tokens": 8,
        "gen_ai.response.finish_reasons": ("stop",),
    }
    assert [(e.name, dict(e.attributes)) for e in span.events] == [("gen_ai.custom", {"tokens": 3})]


async def test_a_derender_stream_counts_the_engine_output_it_consumes():
    from opentelemetry.sdk.trace import TracerProvider

    from derender_svc import telemetry as _derender_readers  # noqa: F401
    from scaleout.v1 import derender_pb2
    from scaleout_common.telemetry.call_summary import CallSummary

    async def requests():
        yield derender_pb2.DerenderStreamRequest(context=derender_pb2.DerenderContext(id="chatcmpl-1"))
        for i, tokens in enumerate(OUTPUT):
            output = engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(index=0, token_ids=tokens)])
            if i == 0:
                output.prompt.num_tokens = 5
            yield derender_pb2.DerenderStreamRequest(engine_output=output)

    span = TracerProvider().get_tracer("t").start_span("s")
    stream = CallSummary(0.0, None, span, streaming=True)
    async for _ in stream.consume(requests()):
        stream.response(derender_pb2.DerenderStreamResponse(chat=derender_pb2.ChatCompletionChunk(id="chatcmpl-1")))
    stream.response(
        derender_pb2.DerenderStreamResponse(
            chat=derender_pb2.ChatCompletionChunk(
                id="chatcmpl-1", choices=[derender_pb2.ChatChunkChoice(index=0, finish_reason="length")]
            )
        )
    )
    stream.end(ok=True)
    assert span.attributes["gen_ai.usage.input_tokens"] == 5
    assert span.attributes["gen_ai.usage.output_tokens"] == sum(map(len, OUTPUT))
    assert span.attributes["gen_ai.response.id"] == "chatcmpl-1"
    assert span.attributes["gen_ai.response.finish_reasons"] == ("length",)
    assert not any(key.startswith("gen_ai.latency") for key in span.attributes)
