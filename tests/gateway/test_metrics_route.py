"""The gateway's `GET /metrics`: every engine replica's vllm: series in one exposition (pipeline_svc/fleet_metrics.py),
as routers and Prometheus read it from a vLLM server's port."""

from __future__ import annotations

import re

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from pipeline_svc.fleet_metrics import merge
from tests.gateway.rest import post

ONE = """# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="a",model_name="m"} 1.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="a",model_name="m"} 7.0
"""


def _type_lines(text: str) -> dict[str, int]:
    names = re.findall(r"^# TYPE (\S+) ", text, flags=re.MULTILINE)
    return {name: names.count(name) for name in names}


def test_merge_writes_each_family_once_with_every_replicas_series():
    other = ONE.replace('engine="a"', 'engine="b"').replace("} 7.0", "} 5.0")
    merged = merge([ONE, other]).decode()
    assert _type_lines(merged) == {"vllm:num_requests_waiting": 1, "vllm:prompt_tokens_total": 1}
    (tokens,) = [f for f in text_string_to_metric_families(merged) if f.name == "vllm:prompt_tokens"]
    assert {s.labels["engine"]: s.value for s in tokens.samples} == {"a": 7.0, "b": 5.0}
    assert merge([]) == b""


@pytest.mark.slow
def test_gateway_metrics_show_one_series_per_engine_replica(fleet):
    prompt_tokens = 0
    for topic in range(6):  # distinct conversations: the prefix hash spreads them over both replicas
        messages = [{"role": "user", "content": f"Say something about the number {topic}."}]
        answer = post(fleet, "/v1/chat/completions", {"messages": messages, "max_tokens": 3})
        assert answer.status_code == 200, answer.text
        prompt_tokens += answer.json()["usage"]["prompt_tokens"]

    response = requests.get(fleet.rest_url + "/metrics", timeout=30)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain"), response.text
    text = response.text
    assert set(_type_lines(text).values()) == {1}  # each family once: one HELP and TYPE
    families = {f.name: f for f in text_string_to_metric_families(text)}
    engines = {f"127.0.0.1:{r.port}" for r in fleet.replicas if r.name.startswith("engine-")}
    waiting = families["vllm:num_requests_waiting"].samples
    assert len(waiting) == 2 and {s.labels["engine"] for s in waiting} == engines
    assert {s.labels["model_name"] for s in waiting} == {"SmolLM2-135M-Instruct"}
    # Each call counted once, by the replica that served it.
    ttft = [s for s in families["vllm:time_to_first_token_seconds"].samples if s.name.endswith("_count")]
    assert sum(s.value for s in ttft) == 6
    assert sum(s.value for s in families["vllm:prompt_tokens"].samples) == prompt_tokens
    lines = [line for line in text.splitlines() if line.startswith("vllm:num_requests_waiting{")]
    assert len(lines) == 2 and all('model_name="' in line for line in lines)
