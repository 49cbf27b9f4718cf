"""NVIDIA Dynamo (ai-dynamo 1.6.1, its registry wheels, no change to it) in front of two real engines on the default
model, each behind our Dynamo worker (`python -m engine_svc.faces.dynamo`): Dynamo's frontend renders and tokenizes,
routes with `--router-mode kv` on the engines' own KV events (each worker relays its engine's SubscribeKvEvents),
and serves the official openai SDK.

Two engines start once for the module, then Dynamo's frontend and a worker per engine as `scaleout-stack
--dynamo-port` starts them (devstack/dynamo.py: Dynamo's file discovery in a temporary folder, its TCP request plane
and ZMQ event plane, no etcd, no NATS); prompts are planted on the engines before their workers start (EARLY).
Outputs are short: the CI machine is small."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import grpc
import openai
import pytest
import requests
from tokenizers import Tokenizer

from devstack.dynamo import Dynamo, DynamoConfig
from devstack.stack import free_port, stop_processes
from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc
from scaleout_common.models import resolve_model
from tests.processes import process, serving, wait

pytest.importorskip("dynamo.frontend", reason="ai-dynamo is not installed (make setup installs it)")
# Two engines loading side by side take minutes on a busy 2-core machine: above the default 300 s per test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

COUNT = [{"role": "user", "content": "Count from 1 to 20, one number per line."}]
# Prompts planted straight on engine 0 or 1 before the workers start; the planted engines do not alternate, so no
# rotation passes by itself.
EARLY = [0, 1, 1, 0]
LATE = [1, 0, 0, 1]


@dataclass
class Fleet:
    client: openai.OpenAI
    engine_ports: list[int]
    folder: Path
    metrics_urls: list[str]  # each worker's Dynamo system server (DYN_SYSTEM_PORT)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[Fleet]:
    logs = tmp_path_factory.mktemp("dynamo")
    with ExitStack() as running:
        engines: list[subprocess.Popen] = []
        running.callback(stop_processes, engines, 10)  # all at once
        ports = [free_port(), free_port()]
        for number, port in enumerate(ports):
            args = ["--port", str(port), "--metrics-port", "-1", "--max-model-len", "2048", "--max-num-seqs", "4"]
            args += ["--drain-delay-s", "0"]
            log = running.enter_context(open(logs / f"engine{number}.log", "wb"))
            engines.append(process([sys.executable, "-m", "engine_svc", *args, "--kv-events"], log))
        wait(lambda: all(serving(p) for p in ports), "the engines", engines)
        _plant(ports, _prompts("Early", EARLY), EARLY)
        env = {"DYN_LOG": "info", "DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS": "0"}  # Dynamo's 5 s before a drain
        config = DynamoConfig([f"127.0.0.1:{p}" for p in ports], log_dir=logs, env=env)
        dynamo = running.enter_context(Dynamo(config))
        client = openai.OpenAI(base_url=dynamo.url, api_key="unused", timeout=240, max_retries=0)
        yield Fleet(client, ports, resolve_model(None), dynamo.metrics_urls)


@pytest.fixture(scope="module")
def model(fleet) -> str:
    return fleet.client.models.list().data[0].id


def _engine(port: int) -> engine_pb2_grpc.EngineServiceStub:
    return engine_pb2_grpc.EngineServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))


def _greedy(fleet: Fleet, token_ids: list[int], max_tokens: int) -> list[int]:
    """The engine's own greedy tokens for a prompt, asked directly over our contract."""
    params = common_pb2.SamplingParams(max_tokens=max_tokens, temperature=0)
    request = engine_pb2.GenerateRequest(token_ids=token_ids, sampling_params=params)
    return list(_engine(fleet.engine_ports[0]).GenerateUnary(request, timeout=120).choices[0].token_ids)


def test_chat_is_the_engines_greedy_answer_to_the_rendered_prompt(fleet, model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(fleet.folder)
    answer = fleet.client.chat.completions.create(model=model, messages=COUNT, max_tokens=16, temperature=0)
    prompt = tokenizer.apply_chat_template(COUNT, add_generation_prompt=True, tokenize=True, return_dict=False)
    ours = _greedy(fleet, list(prompt), 16)
    assert answer.choices[0].message.content == tokenizer.decode(ours, skip_special_tokens=True)
    assert answer.usage.prompt_tokens == len(prompt) and answer.usage.completion_tokens == len(ours) == 16
    assert answer.choices[0].finish_reason == "length"


def test_streamed_completion_with_logprobs_is_the_engines_greedy_tokens(fleet, model):
    tokenizer = Tokenizer.from_file(str(fleet.folder / "tokenizer.json"))
    prompt = "1, 2, 3, 4,"
    stream = fleet.client.completions.create(
        model=model, prompt=prompt, max_tokens=10, temperature=0, logprobs=2, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    text, finish, usage, logprobs = "", None, None, []
    for chunk in stream:
        for choice in chunk.choices:
            text += choice.text
            finish = choice.finish_reason or finish
            logprobs += choice.logprobs.token_logprobs if choice.logprobs else []
        usage = chunk.usage or usage
    ours = _greedy(fleet, tokenizer.encode(prompt, add_special_tokens=False).ids, 10)
    assert text == tokenizer.decode(ours) and finish == "length"
    assert usage is not None and usage.completion_tokens == 10 and len(logprobs) == 10
    assert all(lp <= 0 for lp in logprobs)


def test_a_stop_string_ends_the_engines_request(fleet, model):
    stopped = fleet.client.completions.create(
        model=model, prompt="1, 2, 3, 4,", max_tokens=12, temperature=0, stop=[" 7"]
    )
    assert stopped.choices[0].finish_reason == "stop" and stopped.choices[0].text == " 5, 6,"
    assert stopped.usage.completion_tokens < 12  # the engine stopped, not only Dynamo's text cut


def test_a_schema_and_a_required_tool_call_come_out_as_the_schema_says(fleet, model):
    """Dynamo compiles both into guided JSON; the engine's grammar holds the output to it (compact JSON)."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    schema["additionalProperties"] = False
    shaped = fleet.client.chat.completions.create(
        model=model, messages=COUNT, max_tokens=16, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}},
    )  # fmt: skip
    assert shaped.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(shaped.choices[0].message.content or "")["ok"], bool)
    tool = {"type": "function", "function": {"name": "count", "parameters": schema}}
    called = fleet.client.chat.completions.create(
        model=model, messages=COUNT, max_tokens=40, temperature=0, tools=[tool], tool_choice="required"
    )
    calls = called.choices[0].message.tool_calls or []
    assert calls and calls[0].type == "function" and calls[0].function.name == "count"
    assert isinstance(json.loads(calls[0].function.arguments)["ok"], bool)


def test_a_closed_stream_frees_the_engine(fleet, model):
    stream = fleet.client.completions.create(
        model=model, prompt="Write a long story about a dragon.", max_tokens=1500, temperature=0, stream=True
    )
    for number, _ in enumerate(stream):
        if number == 3:
            break
    stream.close()  # the client goes away: Dynamo cancels, the worker aborts the engine's request
    deadline = time.monotonic() + 10
    while True:
        loads = [_engine(p).GetLoad(engine_pb2.GetLoadRequest(), timeout=10) for p in fleet.engine_ports]
        if all(load.running == 0 and load.waiting == 0 for load in loads):
            break
        assert time.monotonic() < deadline, "a cancelled request is still running (1,500 tokens take minutes here)"
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"n": 2}, "sampling_options.n"),
        ({"best_of": 2}, "sampling_options.best_of"),
        ({"prompt_logprobs": 1}, "output_options.prompt_logprobs"),
    ],
)
def test_a_refused_field_is_a_400_naming_it(fleet, model, extra, field):
    with pytest.raises(openai.BadRequestError) as refused:
        fleet.client.completions.create(model=model, prompt="Hi", max_tokens=4, extra_body=extra)
    assert field in str(refused.value) and "UNSUPPORTED_FIELD" in str(refused.value)


def _queried(port: int) -> int:
    return _engine(port).GetLoad(engine_pb2.GetLoadRequest(), timeout=10).prefix_cache_queried_tokens


def _prompts(name: str, planted_on: list[int]) -> list[str]:
    return [f"{name} {n}: " + " ".join(f"item{n}-{i}" for i in range(30)) for n in range(len(planted_on))]


def _plant(ports: list[int], prompts: list[str], planted_on: list[int]) -> None:
    """Each prompt generated straight on its engine (Dynamo never sees it)."""
    tokenizer = Tokenizer.from_file(str(resolve_model(None) / "tokenizer.json"))
    params = common_pb2.SamplingParams(max_tokens=1, temperature=0)
    for prompt, engine in zip(prompts, planted_on, strict=True):
        ids = tokenizer.encode(prompt, add_special_tokens=False).ids
        _engine(ports[engine]).GenerateUnary(
            engine_pb2.GenerateRequest(token_ids=ids, sampling_params=params), timeout=120
        )


def _assert_routed(fleet: Fleet, model: str, prompts: list[str], planted_on: list[int]) -> None:
    """Each prompt sent through Dynamo with a new ending lands on the engine it was planted on."""
    for prompt, engine in zip(prompts, planted_on, strict=True):
        before = [_queried(p) for p in fleet.engine_ports]
        fleet.client.completions.create(model=model, prompt=prompt + " and one more", max_tokens=1, temperature=0)
        grew = [_queried(p) > b for p, b in zip(fleet.engine_ports, before, strict=True)]
        assert grew == [engine == 0, engine == 1], f"{prompt[:8]} planted on engine {engine}, served by {grew}"


def test_kv_router_sends_a_prefix_to_the_engine_whose_kv_events_name_it(fleet, model):
    """Prompts planted straight on one engine while its worker runs: only that engine's KV events, relayed by its
    worker, can tell the router where they are cached."""
    prompts = _prompts("Late", LATE)
    _plant(fleet.engine_ports, prompts, LATE)
    time.sleep(2)  # the events' way: engine -> its worker -> Dynamo's event plane -> the router's index
    _assert_routed(fleet, model, prompts, LATE)


def test_a_worker_started_after_its_engine_learns_the_blocks_it_holds(fleet, model):
    """Prompts planted before the workers started (the fixture's EARLY): the snapshot each worker's subscription
    begins with tells the router where they are cached."""
    _assert_routed(fleet, model, _prompts("Early", EARLY), EARLY)


def test_each_worker_publishes_its_engines_kv_cache_to_dynamo(fleet):
    """The engine's GetLoad, relayed every second as Dynamo's per-worker snapshot (its dynamo_component_* series)."""
    for port, url in zip(fleet.engine_ports, fleet.metrics_urls, strict=True):
        load = _engine(port).GetLoad(engine_pb2.GetLoadRequest(), timeout=10)
        lines = requests.get(url, timeout=5).text.splitlines()
        total = [float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("dynamo_component_total_blocks{")]
        assert total == [load.kv_blocks_used + load.kv_blocks_free]
