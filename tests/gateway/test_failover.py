"""Replicas behind the gateway: balanced, a draining replica loses no request, none left is a JSON 503."""

from __future__ import annotations

import signal
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from devstack.stack import Stack, StackConfig
from tests.gateway.rest import post

TOKENIZE = {"prompt": "Hello world"}


@pytest.fixture(scope="module")
def render_pair(tmp_path_factory):
    """Two render replicas (tokenizer only: cheap) and nothing else behind a real Envoy."""
    config = StackConfig(
        port=0,
        replicas={"render": 2, "engine": 0, "derender": 0, "chat": 0},
        log_dir=tmp_path_factory.mktemp("failover-logs"),
    )
    with Stack(config) as stack:
        yield stack


def _tokenize_calls(replica) -> float:
    text = urllib.request.urlopen(replica.metrics_url, timeout=5).read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "scaleout_rpc_requests"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("method", "").endswith("/Tokenize")
    )


def test_requests_are_spread_over_the_replicas(render_pair):
    before = [_tokenize_calls(r) for r in render_pair.replicas]
    for _ in range(100):
        assert post(render_pair, "/tokenize/typed", TOKENIZE).status_code == 200
    served = [a - b for a, b in zip((_tokenize_calls(r) for r in render_pair.replicas), before)]
    assert sum(served) == 100
    # Round robin per Envoy worker; each replica takes a fair share (Envoy's workers may lag the first
    # health-check round by a moment after start, so not an exact half).
    assert min(served) >= 25, served


def test_a_draining_replica_loses_no_request(render_pair):
    victim = render_pair.replicas[0].process
    victim.send_signal(signal.SIGTERM)
    answers = [post(render_pair, "/tokenize/typed", TOKENIZE) for _ in range(40)]
    assert [a.status_code for a in answers] == [200] * 40, [a.text for a in answers if a.status_code != 200]
    assert victim.wait(30) == 0


def test_no_healthy_replica_left_is_a_json_503(render_pair):
    last = render_pair.replicas[1].process
    last.kill()
    last.wait(10)
    answer = post(render_pair, "/tokenize/typed", TOKENIZE)
    assert answer.status_code == 503
    assert answer.json()["error"]["code"].startswith("GATEWAY_")
