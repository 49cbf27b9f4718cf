"""A client's one-hop call costs one token of its key's bucket: the one-hop service sends its hops (render,
engine, derender) to the gateway's internal listener, which does not charge the rate limit again and which only
a certificate from the hops' CA reaches. Real Envoy, secure stack."""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
import requests
import yaml

from devstack.stack import Stack, StackConfig
from gateway.edge import Edge, Mtls, Tls
from gateway.envoy_config import Endpoint, Upstream, render_config
from gateway.limits import Limits
from scaleout.v1 import render_pb2, render_pb2_grpc

BUCKET = 4  # tokens; refilled at 1 a second, so a burst of calls that starts within a second meets BUCKET
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "api-keys"
    keys.write_text("carol sk-carol\ndave sk-dave\n")
    config = StackConfig(
        port=0,
        secure=True,
        api_keys=keys,
        limits=Limits(rate_limit_rps=1, rate_limit_burst=BUCKET),
        log_dir=tmp_path_factory.mktemp("rate-limit-logs"),
    )
    with Stack(config) as stack:
        yield stack


def _chat(stack, key: str, stream: bool) -> requests.Response:
    return requests.post(
        stack.rest_url + "/v1/chat/completions",
        json={"messages": USER, "max_tokens": 2, "stream": stream},
        headers={"authorization": f"Bearer {key}"},
        verify=str(stack.ca_cert),
        timeout=120,
    )


def _tokens_taken(stack) -> int:
    """Requests the per-key rate limit let through so far (Envoy's counter, every listener)."""
    url = f"http://{stack.config.host}:{stack.admin_port}/stats?format=json&filter=http_local_rate_limit"
    stats = json.load(urllib.request.urlopen(url, timeout=5))["stats"]
    return sum(s.get("value", 0) for s in stats if s.get("name", "").endswith("http_local_rate_limit.ok"))


def test_a_bucket_of_n_serves_n_one_hop_calls_and_refuses_the_next_with_retry_after(limited):
    streamed = [i % 2 == 1 for i in range(BUCKET + 1)]  # unary and streamed calls alike
    with ThreadPoolExecutor(len(streamed)) as pool:
        answers = list(pool.map(lambda stream: _chat(limited, "sk-carol", stream), streamed))
    codes = sorted(answer.status_code for answer in answers)
    assert codes == [200] * BUCKET + [429], [(a.status_code, a.text[:200]) for a in answers]
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "RATE_LIMITED"
    for stream, answer in zip(streamed, answers):
        if answer.status_code == 200:
            assert answer.text.rstrip().endswith("data: [DONE]") if stream else answer.json()["choices"]


def test_each_one_hop_call_is_charged_exactly_once(limited):
    before = _tokens_taken(limited)
    for stream in (False, True):
        assert _chat(limited, "sk-dave", stream).status_code == 200
    assert _tokens_taken(limited) - before == 2, "the hops were charged too"


def test_the_internal_listener_needs_a_certificate_from_the_hops_ca(limited):
    target = f"{limited.config.host}:{limited.internal_port}"
    key = [("authorization", "Bearer sk-dave")]
    request = render_pb2.TokenizeRequest(prompt="hi")
    anonymous = grpc.ssl_channel_credentials(limited.ca_cert.read_bytes())  # a valid key, no certificate
    with grpc.secure_channel(target, anonymous) as channel, pytest.raises(grpc.RpcError) as refused:
        render_pb2_grpc.RenderServiceStub(channel).Tokenize(request, metadata=key, timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    with limited.grpc_channel(target) as channel:  # a hop's certificate (the stack's client one)
        assert render_pb2_grpc.RenderServiceStub(channel).Tokenize(request, metadata=key, timeout=30).tokens


def test_the_internal_listener_has_the_routes_and_no_rate_limit(tmp_path):
    edge = Edge(tls=Tls(str(tmp_path / "gateway")), mtls=Mtls(str(tmp_path / "hops")), sds_dir=str(tmp_path))
    upstreams = [Upstream("render", [Endpoint("127.0.0.1", 1)]), Upstream("chat", [Endpoint("127.0.0.1", 2)])]
    limits = Limits(rate_limit_rps=5)
    config = yaml.safe_load(render_config(upstreams, 8080, 9901, limits=limits, edge=edge, internal_port=8090))
    gateway, internal = config["static_resources"]["listeners"]
    assert (gateway["name"], internal["name"]) == ("gateway", "internal")
    managers = [listener["filter_chains"][0]["filters"][0]["typed_config"] for listener in (gateway, internal)]
    filters = [[f["name"] for f in manager["http_filters"]] for manager in managers]
    assert "envoy.filters.http.local_ratelimit" in filters[0]
    assert filters[1] == [name for name in filters[0] if name != "envoy.filters.http.local_ratelimit"]
    assert managers[1]["route_config"] == managers[0]["route_config"]
    tls = internal["filter_chains"][0]["transport_socket"]["typed_config"]
    assert tls["require_client_certificate"] is True
    assert tls["common_tls_context"]["validation_context_sds_secret_config"]["name"] == "upstream_ca"
    with pytest.raises(ValueError, match="mtls-dir"):
        render_config(upstreams, 8080, 9901, edge=Edge(tls=edge.tls), internal_port=8090)
    assert len(yaml.safe_load(render_config(upstreams, 8080, 9901))["static_resources"]["listeners"]) == 1
