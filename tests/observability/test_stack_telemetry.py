"""The whole stack (real Envoy, render, engine, derender, chat; default model) exporting to a real OTLP receiver.

One REST and one gRPC chat request through Envoy (chat -> render -> generate -> derender, each hop through
Envoy again): one trace per request across Envoy and every service, correct parent links, rpc.* and gen_ai.*
attributes equal to what the client got back; then each service's /metrics moved by the right amounts.
"""

from __future__ import annotations

import json
import secrets

import grpc
import pytest
import requests
from google.protobuf import struct_pb2

from devstack.stack import Stack, StackConfig
from scaleout.v1 import chat_pb2_grpc, common_pb2, render_pb2
from tests.observability.otlp_receiver import OtlpReceiver
from tests.observability.test_plumbing import scrape

pytestmark = pytest.mark.slow

QUESTION = "What is the capital of France?"
MAX_TOKENS = 12
HOPS = {  # chat's downstream method -> the service that serves it
    "scaleout.v1.RenderService/RenderChat": "scaleout-render",
    "scaleout.v1.EngineService/GenerateUnary": "scaleout-engine",
    "scaleout.v1.EngineService/Generate": "scaleout-engine",
    "scaleout.v1.DerenderService/DerenderChat": "scaleout-derender",
    "scaleout.v1.DerenderService/DerenderStream": "scaleout-derender",
}


@pytest.fixture(scope="module")
def traced_stack(tmp_path_factory):
    with OtlpReceiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        config = StackConfig(port=0, env=env, log_dir=tmp_path_factory.mktemp("traced-stack-logs"))
        with Stack(config) as stack:
            before = {r.name: scrape(r.metrics_url) for r in stack.replicas}
            yield stack, receiver, before


def _traceparent() -> tuple[str, str, str]:
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, parent, f"00-{trace_id}-{parent}-01"


def _trace(receiver, trace_id: str, methods: list[str]):
    """Wait for the whole trace: Envoy's ingress span for each hop plus chat's and each service's spans."""

    def complete(spans):
        servers = {s.name for s in spans if s.kind == "server" and s.service != "scaleout-gateway"}
        gateway = [s for s in spans if s.service == "scaleout-gateway"]
        return servers >= set(methods) and len(gateway) >= len(methods)

    return receiver.wait_for(complete, timeout_s=90, trace_id=trace_id)


def _check_trace(spans, root_parent: str, chat_method: str, hops: list[str], stack):
    by_id = {s.span_id: s for s in spans}
    ports = {r.name.split("-")[0]: r.port for r in stack.replicas}

    def parent(span):
        return by_id[span.parent_span_id]

    chat = next(s for s in spans if s.kind == "server" and s.name == chat_method)
    entry = parent(chat)
    assert entry.service == "scaleout-gateway" and entry.parent_span_id == root_parent
    assert entry.attributes["grpc.path"] == "/" + chat_method
    for method in hops:
        client = next(s for s in spans if s.kind == "client" and s.name == method)
        server = next(s for s in spans if s.kind == "server" and s.name == method and s.service != "scaleout-gateway")
        via = parent(server)
        # chat -> (client span) -> Envoy -> (server span) service
        assert client.service == "scaleout-chat" and client.parent_span_id == chat.span_id
        assert via.service == "scaleout-gateway" and via.parent_span_id == client.span_id
        assert server.service == HOPS[method]
        assert via.attributes["grpc.path"] == "/" + method
        for span in (client, server):
            assert span.attributes["rpc.system.name"] == "grpc"
            assert span.attributes["rpc.method"] == method
            assert span.attributes["rpc.response.status_code"] == "OK"
            assert "error.type" not in span.attributes
        # the one-hop service's hops go through Envoy's internal listener (no per-key rate limit there)
        assert (client.attributes["server.address"], client.attributes["server.port"]) == (
            "127.0.0.1",
            stack.internal_port,
        )
        role = HOPS[method].removeprefix("scaleout-")
        assert (server.attributes["server.address"], server.attributes["server.port"]) == ("127.0.0.1", ports[role])
    assert not any(QUESTION in str(value) for s in spans for value in s.attributes.values())  # no text unless asked
    return chat, {HOPS[m]: next(s for s in spans if s.kind == "server" and s.name == m) for m in hops}


def _check_genai(chat, served, usage, completion_id: str, finish_reason: str, model: str):
    render, engine, derender = served["scaleout-render"], served["scaleout-engine"], served["scaleout-derender"]
    for span in (chat, render, engine):
        assert span.attributes["gen_ai.request.max_tokens"] == MAX_TOKENS
        assert span.attributes["gen_ai.request.temperature"] == 0
    assert render.attributes["gen_ai.request.model"] == engine.attributes["gen_ai.request.model"] == model
    assert render.attributes["gen_ai.usage.input_tokens"] == usage.prompt_tokens
    assert render.attributes["gen_ai.response.id"] == completion_id
    for span in (engine, derender, chat):
        assert span.attributes["gen_ai.usage.input_tokens"] == usage.prompt_tokens
        assert span.attributes["gen_ai.usage.output_tokens"] == usage.completion_tokens
        assert span.attributes["gen_ai.response.finish_reasons"] == [finish_reason]
    assert derender.attributes["gen_ai.response.id"] == chat.attributes["gen_ai.response.id"] == completion_id
    timings = [
        engine.attributes[f"gen_ai.latency.{k}"]
        for k in ("time_in_queue", "time_in_model_prefill", "time_to_first_token", "e2e")
    ]
    assert timings[0] >= 0 and timings[1] > 0 and timings[0] + timings[1] <= timings[2] <= timings[3]


def test_one_trace_per_request_across_envoy_and_every_service(traced_stack):
    stack, receiver, before = traced_stack
    chat = {"messages": [{"role": "user", "content": QUESTION}], "temperature": 0, "max_tokens": MAX_TOKENS}

    # REST, unary (OpenAI's JSON through OpenAIService): chat -> RenderChat, GenerateUnary, DerenderChat
    trace_id, root, traceparent = _traceparent()
    answer = requests.post(
        stack.rest_url + "/v1/chat/completions", json=chat, headers={"traceparent": traceparent}, timeout=120
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    unary_hops = [
        "scaleout.v1.RenderService/RenderChat",
        "scaleout.v1.EngineService/GenerateUnary",
        "scaleout.v1.DerenderService/DerenderChat",
    ]
    spans = _trace(receiver, trace_id, ["scaleout.v1.OpenAIService/ChatCompletions", *unary_hops])
    chat_span, served = _check_trace(spans, root, "scaleout.v1.OpenAIService/ChatCompletions", unary_hops, stack)
    answer_text = body["choices"][0]["message"]["content"]
    assert not any(answer_text in str(value) for s in spans for value in s.attributes.values())
    usage = common_pb2.Usage(
        prompt_tokens=body["usage"]["prompt_tokens"], completion_tokens=body["usage"]["completion_tokens"]
    )
    _check_genai(chat_span, served, usage, body["id"], body["choices"][0]["finish_reason"], body["model"])

    # gRPC, streamed: chat -> RenderChat, Generate (stream), DerenderStream (bidi)
    trace_id, root, traceparent = _traceparent()
    request = render_pb2.RenderChatRequest(
        messages=[common_pb2.ChatMessage(role="user", content=struct_pb2.Value(string_value=QUESTION))],
        temperature=0,
        max_tokens=MAX_TOKENS,
        stream_options=render_pb2.StreamOptions(include_usage=True),
    )
    with grpc.insecure_channel(stack.gateway) as channel:
        chunks = list(
            chat_pb2_grpc.ChatServiceStub(channel).StreamChatCompletion(
                request, metadata=[("traceparent", traceparent)], timeout=120
            )
        )
    stream_hops = [
        "scaleout.v1.RenderService/RenderChat",
        "scaleout.v1.EngineService/Generate",
        "scaleout.v1.DerenderService/DerenderStream",
    ]
    spans = _trace(receiver, trace_id, ["scaleout.v1.ChatService/StreamChatCompletion", *stream_hops])
    chat_span, served = _check_trace(spans, root, "scaleout.v1.ChatService/StreamChatCompletion", stream_hops, stack)
    finish = next(c.finish_reason for chunk in chunks for c in chunk.choices if c.finish_reason)
    last_usage = next(chunk.usage for chunk in reversed(chunks) if chunk.HasField("usage"))
    _check_genai(chat_span, served, last_usage, chunks[0].id, finish, chunks[0].model)
    assert "gen_ai.first_token" in served["scaleout-engine"].events

    # Metrics: each endpoint moved by exactly this traffic (Envoy's health checks are not counted).
    after = {r.name: scrape(r.metrics_url) for r in stack.replicas}

    def moved(replica, name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after[replica].get(key, 0) - before[replica].get(key, 0)

    for replica, methods in {
        "chat-0": ["scaleout.v1.OpenAIService/ChatCompletions", "scaleout.v1.ChatService/StreamChatCompletion"],
        "render-0": ["scaleout.v1.RenderService/RenderChat"] * 2,
        "engine-0": unary_hops[1:2] + stream_hops[1:2],
        "derender-0": unary_hops[2:] + stream_hops[2:],
    }.items():
        for method in set(methods):
            assert moved(replica, "scaleout_rpc_requests_total", method=method, code="OK") == methods.count(method)
            assert moved(replica, "scaleout_rpc_duration_seconds_count", method=method, code="OK") == methods.count(
                method
            )
            assert after[replica][("scaleout_rpc_in_flight", (("method", method),))] == 0
        assert not any(
            name == "scaleout_rpc_errors_total" and moved(replica, name, **dict(labels))
            for name, labels in after[replica]
        )
    tokens_out = usage.completion_tokens + last_usage.completion_tokens
    assert moved("engine-0", "scaleout_engine_prompt_tokens_total") == usage.prompt_tokens + last_usage.prompt_tokens
    assert moved("engine-0", "scaleout_engine_generation_tokens_total") == tokens_out
    for histogram in ("time_to_first_token", "e2e_request_latency", "queue_time"):
        assert moved("engine-0", f"scaleout_engine_{histogram}_seconds_count") == 2
    assert moved("engine-0", "scaleout_engine_inter_token_latency_seconds_count") == tokens_out - 2
    for gauge in ("queue_depth", "running_sequences", "kv_cache_usage_ratio"):
        assert after["engine-0"][(f"scaleout_engine_{gauge}", ())] == 0


def test_services_log_json_lines(traced_stack):
    stack, _, _ = traced_stack
    for log in stack.config.log_dir.glob("*-0.log"):
        entries = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        assert any(e["level"] == "INFO" and e["message"] for e in entries), log.name
