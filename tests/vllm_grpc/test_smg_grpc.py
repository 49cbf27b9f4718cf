"""SMG in gRPC mode (`smg launch --worker-urls grpc://a grpc://b`, its registry wheel, no change to it) drives two
real engines over their vLLM gRPC face and serves the official openai SDK: chat, completions, stop strings
(matched by the engines), n = 2, unary and streamed; its cache_aware policy routes on the engines' KV events.

The engines start once for the module on the default model (4 sequences, 2,048 tokens, KV events on); SMG starts
after both are ready (it probes a worker once, then retries only every 30 s) with its own metrics port and the
model folder as its tokenizer. Outputs are short: the CI machine is small."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import grpc
import openai
import pytest
import requests
from tokenizers import Tokenizer

from devstack.stack import free_port, stop_processes
from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc
from scaleout_common.models import resolve_model
from tests.processes import process, serving, wait

# Two engines loading side by side take minutes on a busy 2-core machine: above the default 300 s per test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

COUNT = [{"role": "user", "content": "Count from 1 to 20, one number per line."}]


@dataclass
class Fleet:
    client: openai.OpenAI
    engine_ports: list[int]
    metrics_url: str  # SMG's Prometheus


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[Fleet]:
    logs, folder = tmp_path_factory.mktemp("smg-grpc"), str(resolve_model(None))
    with ExitStack() as running:
        engines, ports = [], [free_port(), free_port()]
        everyone: list[subprocess.Popen] = []
        running.callback(stop_processes, everyone, 10)  # all at once: one by one took ~22 s
        for number, port in enumerate(ports):
            log = running.enter_context(open(logs / f"engine{number}.log", "wb"))
            args = ["--port", str(port), "--metrics-port", "-1", "--max-model-len", "2048", "--max-num-seqs", "4"]
            args.append("--kv-events")  # SMG subscribes to SubscribeKvEvents for cache_aware
            engines.append(process([sys.executable, "-m", "engine_svc", *args], log))
            everyone.append(engines[-1])
        wait(lambda: all(serving(p) for p in ports), "the engines", engines)
        port, metrics_port = free_port(), free_port()
        smg_bin = os.path.join(os.path.dirname(sys.executable), "smg")
        launch = [smg_bin, "launch", "--worker-urls", *(f"grpc://127.0.0.1:{p}" for p in ports)]
        launch += ["--policy", "cache_aware", "--host", "127.0.0.1", "--port", str(port)]
        launch += ["--prometheus-port", str(metrics_port), "--model-path", folder]
        # No warm-up diversion (a cache hit sent to a worker whose index is thin on purpose): routing follows
        # the events alone, so the test below is deterministic.
        launch += ["--worker-warmup-secs", "0", "--worker-warmup-divert-every", "0"]
        router = process(launch, running.enter_context(open(logs / "smg.log", "wb")))
        everyone.append(router)
        url = f"http://127.0.0.1:{port}"

        def workers_ready() -> bool:
            try:
                return len(requests.get(f"{url}/workers", timeout=2).json().get("workers", [])) == 2 and bool(
                    requests.get(f"{url}/v1/models", timeout=2).json().get("data")
                )
            except (requests.RequestException, ValueError):
                return False

        wait(workers_ready, "SMG with both workers", [router, *engines], 120)
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=240, max_retries=0)
        yield Fleet(client, ports, f"http://127.0.0.1:{metrics_port}/metrics")


@pytest.fixture(scope="module")
def smg(fleet) -> openai.OpenAI:
    return fleet.client


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


def _smg_series(fleet: Fleet, name: str) -> dict[str, float]:
    """One series of SMG's metrics: {labels: value}."""
    text = requests.get(fleet.metrics_url, timeout=5).text
    pairs = [line[len(name) :].rsplit(" ", 1) for line in text.splitlines() if line.startswith(name + "{")]
    return {labels: float(value) for labels, value in pairs}


def _stored_blocks(fleet: Fleet) -> float:
    """Blocks SMG's index took in from stored events, all workers."""
    return sum(v for k, v in _smg_series(fleet, "smg_kv_event_blocks_total").items() if "stored" in k)


def _queried(port: int) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        load = engine_pb2_grpc.EngineServiceStub(channel).GetLoad(engine_pb2.GetLoadRequest(), timeout=10)
    return load.prefix_cache_queried_tokens


def test_cache_aware_sends_a_prefix_to_the_engine_whose_kv_events_name_it(fleet, model):
    """Prompts planted straight on one engine (SMG never saw them: only that engine's KV events can tell SMG
    where they are cached), then sent through SMG with a new ending: each lands on the engine that holds it.
    The planted engines do not alternate, so SMG's fallback without a cache match (the least-loaded worker,
    ties to the one picked least) cannot pass by itself."""
    tokenizer = Tokenizer.from_file(str(resolve_model(None) / "tokenizer.json"))
    planted_on = [1, 0, 0, 1, 1, 0]
    prompts = [f"Note {n}: " + " ".join(f"item{n}-{i}" for i in range(60)) for n in range(len(planted_on))]
    before = _stored_blocks(fleet)
    params = common_pb2.SamplingParams(max_tokens=1, temperature=0)
    for prompt, engine in zip(prompts, planted_on):
        request = engine_pb2.GenerateRequest(token_ids=tokenizer.encode(prompt).ids, sampling_params=params)
        with grpc.insecure_channel(f"127.0.0.1:{fleet.engine_ports[engine]}") as channel:
            list(engine_pb2_grpc.EngineServiceStub(channel).Generate(request))
    deadline = time.monotonic() + 30
    while _stored_blocks(fleet) - before < 16 * len(prompts):  # 18 full blocks a prompt: SMG has them all
        assert time.monotonic() < deadline, _smg_series(fleet, "smg_kv_event_batches_total")
        time.sleep(0.2)
    landed = []
    for prompt in prompts:
        counts = [_queried(p) for p in fleet.engine_ports]
        fleet.client.completions.create(model=model, prompt=prompt + " and then", max_tokens=1, temperature=0)
        landed.append(max((0, 1), key=lambda e: _queried(fleet.engine_ports[e]) - counts[e]))
    assert landed == planted_on
    applied = _smg_series(fleet, "smg_kv_event_batches_total")
    assert sum(v for k, v in applied.items() if 'disposition="applied"' in k) > 0, applied
    assert not any(_smg_series(fleet, "smg_kv_events_unavailable").values())
