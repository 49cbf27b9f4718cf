"""render -> streamed generate -> derender through the real gateway, over REST and over gRPC."""

from __future__ import annotations

import urllib.request

import grpc
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from gateway.envoy_config import SERVICES
from scaleout.v1 import (
    chat_pb2_grpc,
    common_pb2,
    derender_pb2,
    derender_pb2_grpc,
    engine_pb2_grpc,
    render_pb2,
    render_pb2_grpc,
)
from tests.gateway.rest import post, sse_events

QUESTION = "What is the capital of France?"
CHAT = {"messages": [{"role": "user", "content": QUESTION}], "temperature": 0, "max_tokens": 32}


def _grpc_chat(**sampling) -> render_pb2.RenderChatRequest:
    question = common_pb2.ChatMessage(role="user", content=struct_pb2.Value(string_value=QUESTION))
    return render_pb2.RenderChatRequest(messages=[question], temperature=0, **sampling)


def test_every_replica_is_serving_and_reflects_its_service(stack):
    for replica in stack.replicas:
        role = replica.name.split("-")[0]
        name = SERVICES[role][0].full_name
        with grpc.insecure_channel(f"127.0.0.1:{replica.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            for service in ("", name):
                status = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status
                assert status == health_pb2.HealthCheckResponse.SERVING, (replica.name, service)
            reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
            answer = next(
                reflect.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
            )
            listed = {s.name for s in answer.list_services_response.service}
            assert {name, "grpc.health.v1.Health"} <= listed


def test_rest_walk_answers_paris(stack):
    rendered = post(stack, "/v1/chat/completions/render/typed", CHAT)
    assert rendered.status_code == 200, rendered.text
    rendered = rendered.json()
    generate = rendered["generate_request"]
    assert generate["token_ids"] and generate["tokenizer_fingerprint"]

    streamed = post(stack, "/inference/v1/generate/stream", generate)
    assert streamed.status_code == 200, streamed.text
    events = sse_events(streamed)
    assert events[-1]["finished"] is True  # in-band terminal message
    finishes = [
        c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"] != "FINISH_REASON_UNSPECIFIED"
    ]
    assert finishes == ["FINISH_REASON_STOP"]

    derendered = post(
        stack, "/v1/chat/completions/derender/typed", {"context": rendered["derender_context"], "results": events}
    )
    assert derendered.status_code == 200, derendered.text
    choice = derendered.json()["choices"][0]
    assert "Paris" in choice["message"]["content"]
    assert choice["finish_reason"] == "stop"


def test_rest_walk_from_vllms_render_shape_answers_paris(stack):
    """vLLM's render paths answer vLLM's shape (llm-d and vllm-router read `token_ids` there); ours rides along
    under `scaleout`: our GenerateRequest (its token ids are the top-level ones) and DerenderContext."""
    rendered = post(stack, "/v1/chat/completions/render", CHAT)
    assert rendered.status_code == 200, rendered.text
    rendered = rendered.json()
    assert rendered["request_id"].startswith("chatcmpl-") and rendered["sampling_params"]["max_tokens"] == 32
    generate = {**rendered["scaleout"]["generate_request"], "token_ids": rendered["token_ids"]}
    events = sse_events(post(stack, "/inference/v1/generate/stream", generate))
    context = rendered["scaleout"]["derender_context"]
    derendered = post(stack, "/v1/chat/completions/derender/typed", {"context": context, "results": events})
    assert "Paris" in derendered.json()["choices"][0]["message"]["content"]
    completions = post(stack, "/v1/completions/render", {"prompt": [[1, 504], [3575]]})
    assert completions.status_code == 200, completions.text
    assert [item["token_ids"] for item in completions.json()] == [[1, 504], [3575]]
    refused = post(stack, "/v1/completions/render", {"prompt": "hi", "prompts": ["hi"]})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "prompts"
    # all three went to the render replica's HTTP face, untranscoded (render_svc/http_face.py)
    stats = f"http://{stack.config.host}:{stack.admin_port}/stats?filter=^cluster.render_http.upstream_rq_completed$"
    with urllib.request.urlopen(stats, timeout=10) as answer:
        assert int(answer.read().decode().split(":")[1]) >= 3


def test_grpc_walk_through_the_gateway_answers_paris(stack):
    with grpc.insecure_channel(stack.gateway) as channel:
        request = _grpc_chat(max_tokens=32)
        rendered = render_pb2_grpc.RenderServiceStub(channel).RenderChat(request, timeout=60)
        outputs = list(engine_pb2_grpc.EngineServiceStub(channel).Generate(rendered.generate_request, timeout=60))
        assert outputs[0].prompt.num_tokens == len(rendered.generate_request.token_ids)
        assert outputs[-1].finished and outputs[-1].usage.completion_tokens > 0
        completion = derender_pb2_grpc.DerenderServiceStub(channel).DerenderChat(
            derender_pb2.DerenderChatRequest(context=rendered.derender_context, results=outputs), timeout=60
        )
        assert "Paris" in completion.choices[0].message.content
        assert completion.usage.completion_tokens == outputs[-1].usage.completion_tokens


def test_grpc_unary_generate_equals_the_stream(stack):
    with grpc.insecure_channel(stack.gateway) as channel:
        request = _grpc_chat(max_tokens=16)
        rendered = render_pb2_grpc.RenderServiceStub(channel).RenderChat(request, timeout=60)
        engine = engine_pb2_grpc.EngineServiceStub(channel)
        whole = engine.GenerateUnary(rendered.generate_request, timeout=60)
        streamed = [
            t
            for out in engine.Generate(rendered.generate_request, timeout=60)
            for c in out.choices
            for t in c.token_ids
        ]
        assert list(whole.choices[0].token_ids) == streamed
        assert whole.finished


def test_one_hop_chat_over_rest_and_sse(stack):
    answer = post(stack, "/v1/chat/completions", CHAT)
    assert answer.status_code == 200, answer.text
    assert "Paris" in answer.json()["choices"][0]["message"]["content"]

    for path, body in (("/v1/chat/completions/stream", CHAT), ("/v1/chat/completions", {**CHAT, "stream": True})):
        chunks = sse_events(post(stack, path, body))
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        assert "Paris" in text, path
        finished = [c["choices"][0].get("finish_reason") for c in chunks if c["choices"]]
        assert [f for f in finished if f] == ["stop"], path


def test_one_hop_chat_over_grpc(stack):
    with grpc.insecure_channel(stack.gateway) as channel:
        request = _grpc_chat(max_tokens=32)
        chat = chat_pb2_grpc.ChatServiceStub(channel)
        assert "Paris" in chat.CreateChatCompletion(request, timeout=60).choices[0].message.content
        chunks = list(chat.StreamChatCompletion(request, timeout=60))
        assert "Paris" in "".join(c.choices[0].delta.content for c in chunks if c.choices)


def test_sampled_streams_repeat_with_a_seed(stack):
    body = {**CHAT, "temperature": 0.9, "seed": 1234, "max_tokens": 24}
    generate = post(stack, "/v1/chat/completions/render/typed", body).json()["generate_request"]
    runs = [sse_events(post(stack, "/inference/v1/generate/stream", generate)) for _ in range(2)]
    tokens = [[t for e in events for c in e["choices"] for t in c["token_ids"]] for events in runs]
    assert tokens[0] == tokens[1] and len(tokens[0]) > 0


def test_one_hop_chat_stops_the_engine_at_a_stop_string(stack):
    body = {
        "messages": [{"role": "user", "content": "Write a long story about a cat."}],
        "temperature": 0,
        "max_tokens": 64,
        "stop": [" the"],
    }
    engine = next(r for r in stack.replicas if r.name.startswith("engine"))
    generated_before = _generated_tokens(engine)
    answer = post(stack, "/v1/chat/completions", body)
    assert answer.status_code == 200, answer.text
    choice, usage = answer.json()["choices"][0], answer.json()["usage"]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == " the"
    assert " the" not in choice["message"]["content"]
    # The engine was aborted right after the match instead of running to max_tokens.
    assert usage["completion_tokens"] <= _generated_tokens(engine) - generated_before < 64

    chunks = sse_events(post(stack, "/v1/chat/completions", {**body, "stream": True}))
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert streamed == choice["message"]["content"]


def _generated_tokens(replica) -> float:
    text = urllib.request.urlopen(replica.metrics_url, timeout=5).read().decode()
    return sum(
        s.value
        for f in text_string_to_metric_families(text)
        if f.name == "scaleout_engine_generation_tokens"
        for s in f.samples
        if s.name.endswith("_total")
    )
