"""The server surface routers probe, on the gateway's port, over a real stack with two engine replicas: vLLM's
`/health`, `/ping`, `/version` (Envoy's own answers), SGLang's `/get_model_info`, `/get_server_info`,
`/health_generate`, `/loads` (one entry per engine), vllm-router's `/get_load`, the cache resets
(`/flush_cache`, `/reset_prefix_cache`) that empty every engine's prefix cache, and the profiler's
`/start_profile`, `/stop_profile` with vLLM's and SGLang's bodies (a trace per engine). Shapes as SMG 1.13 and
vllm-router 0.1.17 read them (pipeline_svc/faces/, whose tables tests/pipeline/test_faces.py checks row by row).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import aiohttp
import requests
from vllm.benchmarks.lib.endpoint_request_func import async_request_profile

from devstack.stack import Stack
from scaleout_common.version import VERSION
from tests.gateway.conftest import fleet_traces

SYSTEM = "You are a helpful assistant that answers briefly, precisely and politely, whatever the question is."


def _get(stack: Stack, path: str, method: str = "GET") -> requests.Response:
    return requests.request(method, stack.rest_url + path, timeout=120)


def _engines(stack: Stack) -> list[str]:
    return [f"127.0.0.1:{r.port}" for r in stack.replicas if r.name.startswith("engine-")]


def _cached_blocks(stack: Stack) -> dict[str, int]:
    answer = _get(stack, "/inference/v1/loads")
    assert answer.status_code == 200, answer.text
    return {e["engine"]: e["load"]["kv_blocks_cached"] for e in answer.json()["engines"]}


def test_probes_are_the_gateways_own_answers(fleet):
    for method, path in (("GET", "/health"), ("GET", "/ping"), ("POST", "/ping")):
        answer = _get(fleet, path, method)
        assert answer.status_code == 200 and answer.text == "", (method, path, answer.text)
    version = _get(fleet, "/version")
    assert version.status_code == 200 and version.json() == {"version": VERSION}
    assert _get(fleet, "/health", "POST").status_code == 404  # vLLM's /health takes GET only


def test_sglang_model_and_server_info(fleet):
    model_id = _get(fleet, "/v1/models").json()["data"][0]["id"]
    for path in ("/get_model_info", "/model_info"):
        info = _get(fleet, path).json()
        assert info["is_generation"] is True and info["architectures"] == ["LlamaForCausalLM"]
    for path in ("/get_server_info", "/server_info"):
        server = _get(fleet, path).json()
        assert server["served_model_name"] == model_id and server["version"] == VERSION
        assert server["context_length"] > 0 and server["page_size"] > 0 and server["max_total_num_tokens"] > 0
    # vLLM's `/server_info` is the same object with its config beside: each engine replica a data-parallel rank.
    vllm = _get(fleet, "/server_info?config_format=json").json()["vllm_config"]
    assert vllm["parallel_config"]["data_parallel_size"] == 2 and vllm["model_config"]["served_model_name"] == model_id


def test_health_generate_generates_one_token(fleet):
    answer = _get(fleet, "/health_generate")
    assert answer.status_code == 200 and answer.text == ""


def test_loads_have_an_entry_per_engine(fleet):
    model_id = _get(fleet, "/v1/models").json()["data"][0]["id"]
    body = _get(fleet, f"/loads?model={model_id}").json()
    assert body["dp_rank_count"] == 2 and body["version"] == VERSION
    assert [e["worker"] for e in body["loads"]] == _engines(fleet)  # in --engines order
    assert [e["dp_rank"] for e in body["loads"]] == [0, 1]
    assert all(e["max_total_num_tokens"] > 0 and 0 <= e["utilization"] <= 1 for e in body["loads"])
    assert body["aggregate"]["total_reqs"] == sum(e["num_total_reqs"] for e in body["loads"])
    assert _get(fleet, "/loads?model=no-such-model").json()["loads"] == []
    smg = _get(fleet, "/v1/loads?include=core,disagg,queues,memory").json()["loads"]
    assert [e["disaggregation"]["mode"] for e in smg] == ["null", "null"] and smg[0]["memory"] is None
    assert "disaggregation" not in _get(fleet, "/v1/loads?include=core").json()["loads"][0]
    assert [e["dp_rank"] for e in _get(fleet, "/loads?dp_rank=1").json()["loads"]] == [1]
    bad = _get(fleet, "/loads?include=core,bogus")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_REQUEST"
    assert _get(fleet, "/loads?format=prometheus").json()["error"]["code"] == "UNSUPPORTED_FIELD"
    load = _get(fleet, "/get_load").json()
    assert set(load) == {"load"} and isinstance(load["load"], int) and load["load"] >= 0


def test_cache_resets_empty_every_engines_prefix_cache(fleet):
    resets = (("POST", "/flush_cache?timeout=60.0"), ("GET", "/flush_cache"), ("POST", "/reset_prefix_cache"))
    for reset in resets:  # SGLang's bench_serving --flush-cache sends its timeout
        for turn in range(4):  # the gateway spreads new conversations over both engines
            chat = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"hi {turn}"}]}
            assert requests.post(fleet.rest_url + "/v1/chat/completions", json={**chat, "max_tokens": 2}).ok
        assert sum(_cached_blocks(fleet).values()) > 0
        answer = _get(fleet, reset[1], reset[0])
        assert answer.status_code == 200, answer.text
        assert answer.text == "Cache flushed.\n" if "flush" in reset[1] else answer.json() == {"success": True}
        assert set(_cached_blocks(fleet).values()) == {0}, reset
    negative = _get(fleet, "/flush_cache?timeout=-1", "POST")
    assert negative.status_code == 400 and negative.json()["error"]["param"] == "timeout"


def test_profile_routes_trace_every_engine_with_vllms_and_sglangs_bodies(fleet, tmp_path, tmp_path_factory):
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    vllm = _post(fleet, "/start_profile", {"profile_prefix": "vllm", "delay_iterations": 0, "max_iterations": 0})
    assert vllm.status_code == 200 and vllm.text == "Start profiling.\n"
    again = _post(fleet, "/start_profile", {})
    assert again.status_code == 400 and again.json()["error"]["code"] == "PROFILER_STATE"
    assert requests.post(fleet.rest_url + "/v1/chat/completions", json=chat, timeout=120).ok
    assert _post(fleet, "/stop_profile", None).status_code == 200
    traces = sorted(fleet_traces(tmp_path_factory).glob("vllm-*.pt.trace.json.gz"))
    assert len(traces) == 2  # one per engine replica
    assert asyncio.run(_vllm_bench_profile(fleet.rest_url)) == [True, True]  # `vllm bench serve --profile`: no body
    # SGLang's bench_serving --profile: its own output_dir, step counts as strings, its activity names
    sglang = {"output_dir": str(tmp_path), "num_steps": "2", "activities": ["CPU"], "profile_by_stage": False}
    assert _post(fleet, "/start_profile", {**sglang, "profile_prefix": None}).status_code == 200
    assert requests.post(fleet.rest_url + "/v1/chat/completions", json=chat, timeout=120).ok
    assert _post(fleet, "/stop_profile", {}).text == "Stop profiling. This will take some time.\n"
    assert len(list(tmp_path.glob("engine-*.pt.trace.json.gz"))) == 2
    refused = _post(fleet, "/start_profile", {"activities": ["RPD"]})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "activities"
    assert _post(fleet, "/stop_profile", None).json()["error"]["code"] == "PROFILER_STATE"


async def _vllm_bench_profile(url: str) -> list[bool]:
    async with aiohttp.ClientSession() as session:
        return [
            (await async_request_profile(url + path, session)).success for path in ("/start_profile", "/stop_profile")
        ]


def _post(stack: Stack, path: str, body) -> requests.Response:
    return requests.post(stack.rest_url + path, json=body, timeout=120)


def test_health_is_503_while_a_role_has_no_healthy_replica(fleet):
    """Last in the module: the derender replica is stopped (SIGSTOP) until Envoy's health checks fail it."""
    derender = next(r for r in fleet.replicas if r.name == "derender-0")
    os.kill(derender.process.pid, signal.SIGSTOP)
    try:
        statuses = []
        for _ in range(40):
            statuses.append(_get(fleet, "/health").status_code)
            if statuses[-1] == 503:
                break
            time.sleep(0.5)
        ping = _get(fleet, "/ping", "POST").status_code
    finally:
        os.kill(derender.process.pid, signal.SIGCONT)
    assert statuses[-1] == 503 and ping == 503, statuses
    for _ in range(40):
        if _get(fleet, "/health").status_code == 200:
            break
        time.sleep(0.5)
    assert _get(fleet, "/health").status_code == 200
