"""Fuzzing: at least 1,000 REST bodies and 1,000 gRPC messages per run against the real stack; none may yield a
5xx, INTERNAL, UNKNOWN or Python's text. Inputs mix random JSON, valid requests with one field replaced by
random JSON (NaN strings, huge numbers, deep nesting, wrong types), and corrupted protobuf bytes."""

from __future__ import annotations

import random

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devstack.stack import Stack, StackConfig
from scaleout.v1 import common_pb2, derender_pb2, engine_pb2, render_pb2
from tests.faults.conftest import FAULT_MARKERS, SERVER_FAULTS, post

USER = [{"role": "user", "content": "hi"}]
# (route, a valid body) for every REST route that takes one; generation is kept to a few tokens.
ROUTES = [
    ("/v1/chat/completions/render", {"messages": USER, "max_tokens": 4}),
    ("/v1/chat/completions/render_batch", {"requests": [{"messages": USER, "max_tokens": 4}]}),
    ("/v1/chat/completions/render/typed", {"messages": USER, "max_tokens": 4}),
    ("/v1/completions/render", {"prompt": [[1, 2], [3]], "max_tokens": 4}),
    ("/v1/completions/render/typed", {"prompts": ["hi"], "max_tokens": 4}),
    ("/tokenize", {"prompt": "hi"}),
    ("/detokenize", {"tokens": [1, 2]}),
    ("/inference/v1/generate", {"token_ids": [1, 2], "sampling_params": {"max_tokens": 2}}),
    ("/inference/v1/generate/typed", {"token_ids": [1, 2], "sampling_params": {"max_tokens": 2}}),
    ("/inference/v1/generate/stream", {"token_ids": [1, 2], "sampling_params": {"max_tokens": 2}}),
    ("/inference/v1/abort_requests", {"request_ids": ["x"]}),
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 2}),
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 2, "stream": True}),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2}),
    (
        "/v1/chat/completions/derender/typed",
        {"context": {"id": "x"}, "results": [{"choices": [{"index": 0, "token_ids": [42]}], "finished": True}]},
    ),
    (
        "/v1/chat/completions/derender",
        {
            "generate_response": {"request_id": "x", "choices": [{"index": 0, "token_ids": [42]}]},
            "chat_request": {"messages": USER, "max_tokens": 2},
        },
    ),
]
SPECIALS = ["NaN", "Infinity", "-Infinity", 1e308, -(2**63), 2**31, 2**64, -1, 0, "", "\x00", "\ud7ff" * 3, {}, []]

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(SPECIALS),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12,
)


def _mutate(body, rng: random.Random, value, depth: int):
    """`body` with one field (at any depth) replaced by `value`, or a new key, or nested `depth` levels deep."""
    if rng.random() < 0.15:
        value = {"a": value}
        for _ in range(depth):
            value = {"a": value} if rng.random() < 0.5 else [value]
    if isinstance(body, dict) and body:
        key = rng.choice([*body, "unexpected_field", "logit_bias", "temperature", "n", "priority"])
        copy = dict(body)
        if key in body and rng.random() < 0.5:
            copy[key] = _mutate(body[key], rng, value, depth)
        else:
            copy[key] = value
        return copy
    if isinstance(body, list) and body:
        copy = list(body)
        i = rng.randrange(len(copy))
        copy[i] = _mutate(copy[i], rng, value, depth) if rng.random() < 0.5 else value
        return copy
    return value


def _served_without_fault(answer) -> None:
    assert answer.status_code < 500, (answer.status_code, answer.text[:500])
    text = answer.text[-4000:]
    assert not any(marker in text for marker in FAULT_MARKERS), text[:500]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    config = StackConfig(
        port=0,
        replicas={"render": 1, "engine": 1, "derender": 1, "chat": 1},
        # Short contexts: a fuzzed request that is valid cannot generate for long.
        service_args={"engine": ["--max-model-len", "96"]},
        log_dir=tmp_path_factory.mktemp("fuzz-logs"),
    )
    with Stack(config) as running:
        yield running


REST_EXAMPLES = 1100
GRPC_EXAMPLES = 1100
sent = {"rest": 0, "grpc": 0}


@settings(max_examples=REST_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(route=st.sampled_from(ROUTES), value=json_value, seed=st.integers(0, 2**32), depth=st.integers(0, 120))
def test_rest_fuzz_never_yields_a_server_fault(stack, route, value, seed, depth):
    path, valid = route
    rng = random.Random(seed)
    choice = rng.random()
    if choice < 0.1:
        body = value  # any JSON at all
    elif choice < 0.15:
        body = "[" * depth * 10 + "]" * depth * 10  # a depth bomb
    else:
        body = _mutate(valid, rng, value, depth)
    sent["rest"] += 1
    _served_without_fault(post(stack, path, body, timeout=60))


GRPC_METHODS = [
    (
        "/scaleout.v1.RenderService/RenderChat",
        render_pb2.RenderChatRequest(messages=[{"role": "user", "content": {"string_value": "hi"}}]),
    ),
    ("/scaleout.v1.RenderService/Tokenize", render_pb2.TokenizeRequest(prompt="hi")),
    (
        "/scaleout.v1.EngineService/GenerateUnary",
        engine_pb2.GenerateRequest(token_ids=[1, 2], sampling_params=common_pb2.SamplingParams(max_tokens=2)),
    ),
    ("/scaleout.v1.EngineService/Abort", engine_pb2.AbortRequest(request_ids=["x"])),
    (
        "/scaleout.v1.DerenderService/DerenderChat",
        derender_pb2.DerenderChatRequest(
            context=derender_pb2.DerenderContext(id="x"),
            results=[engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(index=0, token_ids=[42])])],
        ),
    ),
]


def _corrupt(data: bytes, rng: random.Random, noise: bytes) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        return noise
    buffer = bytearray(data + noise[:4])
    if kind == 1 and buffer:
        for _ in range(rng.randint(1, 4)):
            buffer[rng.randrange(len(buffer))] ^= 1 << rng.randrange(8)
        return bytes(buffer)
    if kind == 2:
        return bytes(buffer[: rng.randrange(len(buffer) + 1)])
    return bytes(buffer) + noise


@pytest.fixture(scope="module")
def channel(stack):
    with grpc.insecure_channel(stack.gateway) as opened:
        yield opened


@settings(max_examples=GRPC_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(method=st.sampled_from(GRPC_METHODS), noise=st.binary(max_size=64), seed=st.integers(0, 2**32))
def test_grpc_fuzz_never_yields_internal_or_unknown(channel, method, noise, seed):
    path, valid = method
    payload = _corrupt(valid.SerializeToString(), random.Random(seed), noise)
    call = channel.unary_unary(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    sent["grpc"] += 1
    try:
        call(payload, timeout=60)
    except grpc.RpcError as error:
        assert error.code().name not in (*SERVER_FAULTS, "UNAVAILABLE"), (error.code(), error.details())
        assert "Traceback" not in (error.details() or "") and "<class" not in (error.details() or "")


def test_the_run_sent_enough_inputs():
    """Runs after the two fuzzers (file order): the issue asks for at least 1,000 of each per run."""
    assert sent["rest"] >= 1000 and sent["grpc"] >= 1000, sent
