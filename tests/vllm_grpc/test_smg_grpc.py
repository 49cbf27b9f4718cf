"""SMG in gRPC mode (`smg launch --worker-urls grpc://a grpc://b`, its registry wheel, no change to it) drives two
real engines over their vLLM gRPC face and serves the official openai SDK: chat, completions, stop strings
(matched by the engines), n = 2, unary and streamed.

The engines start once for the module on the default model (4 sequences, 2,048 tokens); SMG starts after both
are ready (it probes a worker once, then retries only every 30 s) with its own metrics port and the model
folder as its tokenizer. Outputs are short: the CI machine is small."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack

import grpc
import openai
import pytest
import requests
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.stack import free_port
from scaleout_common.models import resolve_model

# Two engines loading side by side take minutes on a busy 2-core machine: above the default 300 s per test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

COUNT = [{"role": "user", "content": "Count from 1 to 20, one number per line."}]


def _process(args: list[str], log) -> subprocess.Popen:
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _serving(port: int) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError:
            return False
    return answer.status == health_pb2.HealthCheckResponse.SERVING


def _wait(ready, what: str, processes: list[subprocess.Popen], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def smg(tmp_path_factory) -> Iterator[openai.OpenAI]:
    logs, folder = tmp_path_factory.mktemp("smg-grpc"), str(resolve_model(None))
    with ExitStack() as running:
        engines, ports = [], [free_port(), free_port()]
        for number, port in enumerate(ports):
            log = running.enter_context(open(logs / f"engine{number}.log", "wb"))
            args = ["--port", str(port), "--metrics-port", "-1", "--max-model-len", "2048", "--max-num-seqs", "4"]
            engines.append(_process([sys.executable, "-m", "engine_svc", *args], log))
            running.callback(_stop, engines[-1])
        _wait(lambda: all(_serving(p) for p in ports), "the engines", engines)
        port = free_port()
        smg_bin = os.path.join(os.path.dirname(sys.executable), "smg")
        launch = [smg_bin, "launch", "--worker-urls", *(f"grpc://127.0.0.1:{p}" for p in ports)]
        launch += ["--policy", "cache_aware", "--host", "127.0.0.1", "--port", str(port)]
        launch += ["--prometheus-port", str(free_port()), "--model-path", folder]
        router = _process(launch, running.enter_context(open(logs / "smg.log", "wb")))
        running.callback(_stop, router)
        url = f"http://127.0.0.1:{port}"

        def workers_ready() -> bool:
            try:
                return len(requests.get(f"{url}/workers", timeout=2).json().get("workers", [])) == 2 and bool(
                    requests.get(f"{url}/v1/models", timeout=2).json().get("data")
                )
            except (requests.RequestException, ValueError):
                return False

        _wait(workers_ready, "SMG with both workers", [router, *engines], 120)
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=240, max_retries=0)


@pytest.fixture(scope="module")
def model(smg) -> str:
    return smg.models.list().data[0].id


def test_chat_unary_and_a_stop_string_the_engine_matched(smg, model):
    free = smg.chat.completions.create(model=model, messages=COUNT, max_tokens=6, temperature=0)
    assert free.choices[0].finish_reason == "length" and free.usage.completion_tokens == 6
    assert free.choices[0].message.content.startswith("1")
    stopped = smg.chat.completions.create(model=model, messages=COUNT, max_tokens=12, temperature=0, stop=["2"])
    assert stopped.choices[0].finish_reason == "stop" and "2" not in stopped.choices[0].message.content
    assert stopped.usage.completion_tokens < 12  # the engine stopped, not only SMG's text cut


def test_chat_streamed_with_two_choices_each_ending_on_the_stop_string(smg, model):
    stream = smg.chat.completions.create(
        model=model, messages=COUNT, max_tokens=12, temperature=0, stop=["3"], n=2, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    usage = None
    for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            finishes[choice.index] = choice.finish_reason or finishes.get(choice.index)
        usage = chunk.usage or usage
    assert finishes == {0: "stop", 1: "stop"} and texts[0] == texts[1] and "3" not in texts[0]
    assert texts[0].startswith("1") and usage is not None and usage.completion_tokens < 24


def test_completions_unary_and_streamed(smg, model):
    unary = smg.completions.create(model=model, prompt="1, 2, 3, 4,", max_tokens=8, temperature=0, stop=[" 7"])
    assert unary.choices[0].finish_reason == "stop" and unary.choices[0].text.startswith(" 5")
    streamed = smg.completions.create(
        model=model, prompt="1, 2, 3, 4,", max_tokens=8, temperature=0, stop=[" 7"], stream=True
    )
    assert "".join(c.choices[0].text for c in streamed if c.choices) == unary.choices[0].text


def test_structured_output_and_a_required_tool_call_come_out_as_the_schema_says(smg, model):
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    shaped = smg.chat.completions.create(
        model=model, messages=COUNT, max_tokens=40, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}},
    )  # fmt: skip
    assert shaped.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(shaped.choices[0].message.content)["ok"], bool)
    tool = {"type": "function", "function": {"name": "count", "parameters": schema}}
    called = smg.chat.completions.create(
        model=model, messages=COUNT, max_tokens=60, temperature=0, tools=[tool], tool_choice="required"
    )
    calls = called.choices[0].message.tool_calls
    assert (
        calls and calls[0].function.name == "count" and isinstance(json.loads(calls[0].function.arguments)["ok"], bool)
    )
