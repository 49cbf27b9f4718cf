"""The secure stack: TLS at the gateway (rotated live), mTLS between hops, API keys (reloaded live) over REST and
gRPC, per-key rate limits, and admin RPCs scoped to the key that made the request."""

from __future__ import annotations

import json
import socket
import ssl
import time

import grpc
import pytest
import requests
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.stack import Stack, StackConfig
from gateway.limits import Limits
from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc, render_pb2, render_pb2_grpc

KEYS = "alice sk-alice\nbob sk-bob\nthrottled sk-throttled\nops sk-ops admin\n"
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "api-keys"
    keys.write_text(KEYS)
    config = StackConfig(
        port=0,
        secure=True,
        api_keys=keys,
        limits=Limits(rate_limit_rps=20, rate_limit_burst=40),
        replicas={"render": 1, "engine": 2, "derender": 1, "chat": 1},
        log_dir=tmp_path_factory.mktemp("secure-logs"),
    )
    with Stack(config) as stack:
        yield stack


def _post(stack, path, body, key=None, headers=None):
    headers = {**({"authorization": f"Bearer {key}"} if key else {}), **(headers or {})}
    return requests.post(stack.rest_url + path, json=body, headers=headers, verify=str(stack.ca_cert), timeout=120)


def _md(key):
    return [("authorization", f"Bearer {key}")]


def test_rest_needs_a_valid_key_and_says_so_in_the_openai_shape(secure):
    for key in (None, "sk-wrong", "sk-alic", "sk-alice2"):
        answer = _post(secure, "/tokenize", {"prompt": "hi"}, key)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == "Bearer"
        error = answer.json()["error"]
        assert error["code"] == "INVALID_API_KEY" and error["type"] == "authentication_error"
    assert _post(secure, "/tokenize", {"prompt": "hi"}, "sk-alice").status_code == 200
    assert _post(secure, "/tokenize", {"prompt": "hi"}, headers={"x-api-key": "sk-alice"}).status_code == 200
    assert requests.get(secure.rest_url + "/openapi.json", verify=str(secure.ca_cert)).status_code == 200


def test_grpc_needs_a_valid_key_in_metadata_and_health_does_not(secure):
    with secure.grpc_channel() as channel:
        stub = render_pb2_grpc.RenderServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Tokenize(render_pb2.TokenizeRequest(prompt="hi"), timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert stub.Tokenize(render_pb2.TokenizeRequest(prompt="hi"), metadata=_md("sk-alice"), timeout=30).tokens
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert health.status == health_pb2.HealthCheckResponse.SERVING


def test_the_one_hop_service_calls_on_with_its_callers_key(secure):
    body = {"messages": USER, "max_tokens": 3}
    assert _post(secure, "/v1/chat/completions", body, "sk-alice").status_code == 200
    streamed = _post(secure, "/v1/chat/completions", {**body, "stream": True}, "sk-alice")
    assert streamed.status_code == 200 and streamed.text.rstrip().endswith("data: [DONE]")
    assert _post(secure, "/v1/chat/completions", body).status_code == 401


def test_services_refuse_peers_without_a_certificate_from_the_ca(secure):
    replica = secure.replicas[0]
    target = f"{secure.config.host}:{replica.port}"
    anonymous_tls = grpc.ssl_channel_credentials(secure.ca_cert.read_bytes())
    for channel in (grpc.insecure_channel(target), grpc.secure_channel(target, anonymous_tls)):
        with channel, pytest.raises(grpc.RpcError) as refused:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    with secure.grpc_channel(target) as channel:  # a hop's certificate, from the hops' CA
        assert health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status


def test_a_client_certificate_is_no_hops_certificate(secure):
    """Client certificates come from a CA of their own: one given to a client passes neither at a service nor at
    the internal listener (which skips the rate limit)."""
    client = secure._workdir / "certs" / "clients" / "client"
    as_client = grpc.ssl_channel_credentials(
        secure.ca_cert.read_bytes(), (client / "tls.key").read_bytes(), (client / "tls.crt").read_bytes()
    )
    for port in (secure.replicas[0].port, secure.internal_port):
        target = f"{secure.config.host}:{port}"
        with grpc.secure_channel(target, as_client) as channel, pytest.raises(grpc.RpcError) as refused:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, port
    with secure.grpc_channel() as channel:  # ... and it is a client's at the gateway
        assert health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status


def test_services_refuse_a_call_without_the_gateways_identity(secure):
    """Keys are on: a call that reaches a service without the identity the gateway sets is refused, never
    trusted as an admin's (a hop's certificate alone is not enough)."""
    render = next(r for r in secure.replicas if r.name.startswith("render-"))
    request = render_pb2.TokenizeRequest(prompt="hi")
    with secure.grpc_channel(f"{secure.config.host}:{render.port}") as channel:
        stub = render_pb2_grpc.RenderServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Tokenize(request, timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "IDENTITY_REQUIRED" in str(refused.value.trailing_metadata())
        assert stub.Tokenize(request, metadata=[("x-scaleout-client", "alice")], timeout=30).tokens


def test_plaintext_to_the_gateway_is_refused(secure):
    with pytest.raises(requests.ConnectionError):
        requests.post(f"http://{secure.gateway}/tokenize", json={"prompt": "hi"}, timeout=10)


def _serial(stack) -> int:
    context = ssl.create_default_context(cafile=str(stack.ca_cert))
    with (
        socket.create_connection((stack.config.host, stack.port)) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        return int(tls.getpeercert()["serialNumber"], 16)


def test_the_gateway_certificate_rotates_without_a_restart(secure):
    before = _serial(secure)
    secure.authority.rotate(secure.ca_cert.parent / "gateway")
    deadline = time.monotonic() + 10
    while _serial(secure) == before:
        assert time.monotonic() < deadline, "Envoy kept serving the old certificate"
        time.sleep(0.2)
    assert secure.envoy.poll() is None
    assert _post(secure, "/tokenize", {"prompt": "hi"}, "sk-alice").status_code == 200


def test_keys_are_reloaded_from_their_file(secure):
    path = secure.api_keys_path
    path.write_text(KEYS + "carol sk-carol\n")
    deadline = time.monotonic() + 15
    while _post(secure, "/tokenize", {"prompt": "hi"}, "sk-carol").status_code != 200:
        assert time.monotonic() < deadline, "a new key was not picked up"
        time.sleep(0.5)
    path.write_text(KEYS)
    while _post(secure, "/tokenize", {"prompt": "hi"}, "sk-carol").status_code != 401:
        assert time.monotonic() < deadline + 15, "a revoked key still works"
        time.sleep(0.5)


def test_each_key_has_its_own_rate_limit_with_retry_after(secure):
    answers = [_post(secure, "/tokenize", {"prompt": "hi"}, "sk-throttled") for _ in range(80)]
    limited = [a for a in answers if a.status_code == 429]
    assert limited, [a.status_code for a in answers]
    assert {a.status_code for a in answers} <= {200, 429}
    assert limited[0].headers["retry-after"] == "1"
    assert limited[0].json()["error"]["code"] == "RATE_LIMITED"
    assert _post(secure, "/tokenize", {"prompt": "hi"}, "sk-bob").status_code == 200
    time.sleep(2.1)
    assert _post(secure, "/tokenize", {"prompt": "hi"}, "sk-throttled").status_code == 200


def test_spoofed_identity_headers_are_dropped(secure):
    with secure.grpc_channel() as channel:
        stub = engine_pb2_grpc.EngineServiceStub(channel)
        spoofed = [*_md("sk-alice"), ("x-scaleout-client", "ops"), ("x-scaleout-admin", "true")]
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetLoad(engine_pb2.GetLoadRequest(), metadata=spoofed, timeout=30)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def _long(request_id: str, priority: int = 0) -> engine_pb2.GenerateRequest:
    sampling = common_pb2.SamplingParams(max_tokens=4000, ignore_eos=True)
    return engine_pb2.GenerateRequest(
        request_id=request_id, token_ids=[1, 2, 3], priority=priority, sampling_params=sampling
    )


def test_admin_rpcs_are_scoped_to_the_key(secure):
    with secure.grpc_channel() as channel:
        stub = engine_pb2_grpc.EngineServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetLoad(engine_pb2.GetLoadRequest(), metadata=_md("sk-alice"), timeout=30)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert stub.GetLoad(engine_pb2.GetLoadRequest(), metadata=_md("sk-ops"), timeout=30) is not None
        with pytest.raises(grpc.RpcError) as refused:
            stub.GenerateUnary(_long("jump", priority=-(2**31)), metadata=_md("sk-alice"), timeout=30)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_abort_reaches_the_owning_engine_and_only_for_its_owner(secure):
    """Two engine replicas: Abort through the gateway finds the one running the request, every time."""
    with secure.grpc_channel() as channel:
        stub = engine_pb2_grpc.EngineServiceStub(channel)
        for trial in range(8):
            request_id = f"abort-{trial}-{time.monotonic_ns()}"
            call = stub.Generate(_long(request_id), metadata=_md("sk-alice"), timeout=120)
            first = next(iter(call))
            assert first.request_id == request_id
            other = stub.Abort(engine_pb2.AbortRequest(request_ids=[request_id]), metadata=_md("sk-bob"), timeout=30)
            assert list(other.aborted) == [] and list(other.not_found) == [request_id]
            own = stub.Abort(engine_pb2.AbortRequest(request_ids=[request_id]), metadata=_md("sk-alice"), timeout=30)
            assert list(own.aborted) == [request_id], trial
            last = list(call)[-1]
            assert last.finished and last.choices[0].finish_reason == common_pb2.FINISH_REASON_ABORT


def test_a_live_id_is_neither_confirmed_nor_blocked_across_keys(secure):
    """Request ids are each key's own (engine_svc/serving/tenancy.py): bob sending alice's live id runs (no 409
    that would confirm it exists, no squatting), and bob's Abort of it ends his request, not hers."""
    request_id = f"dup-{time.monotonic_ns()}"
    with secure.grpc_channel() as channel:
        stub = engine_pb2_grpc.EngineServiceStub(channel)
        alices = stub.Generate(_long(request_id), metadata=_md("sk-alice"), timeout=120)
        assert next(alices).request_id == request_id
        bobs = stub.Generate(_long(request_id), metadata=_md("sk-bob"), timeout=120)
        assert next(bobs).request_id == request_id
        bob = stub.Abort(engine_pb2.AbortRequest(request_ids=[request_id]), metadata=_md("sk-bob"), timeout=30)
        assert list(bob.aborted) == [request_id]
        assert list(bobs)[-1].choices[0].finish_reason == common_pb2.FINISH_REASON_ABORT
        assert not next(alices).finished  # hers runs on
        own = stub.Abort(engine_pb2.AbortRequest(request_ids=[request_id]), metadata=_md("sk-alice"), timeout=30)
        assert list(own.aborted) == [request_id]
        assert list(alices)[-1].choices[0].finish_reason == common_pb2.FINISH_REASON_ABORT


def test_a_rest_stream_runs_with_its_callers_key_so_its_owner_can_abort_it(secure):
    """`/inference/v1/generate/stream` reaches the engine through the one-hop relay, with the caller's key: Abort
    through the gateway finds it for that key, and not for another."""
    request_id = f"rest-abort-{time.monotonic_ns()}"
    body = {
        "request_id": request_id,
        "token_ids": [1, 2, 3],
        "sampling_params": {"max_tokens": 4000, "ignore_eos": True},
    }
    with requests.post(
        secure.rest_url + "/inference/v1/generate/stream",
        json=body,
        headers={"authorization": "Bearer sk-alice"},
        verify=str(secure.ca_cert),
        stream=True,
        timeout=120,
    ) as streamed:
        assert streamed.status_code == 200
        events = (json.loads(line[len(b"data: ") :]) for line in streamed.iter_lines() if line.startswith(b"data: "))
        assert next(events)["request_id"] == request_id
        other = _post(secure, "/inference/v1/abort_requests", {"request_ids": [request_id]}, "sk-bob").json()
        assert other["aborted"] == [] and other["not_found"] == [request_id]
        own = _post(secure, "/inference/v1/abort_requests", {"request_ids": [request_id]}, "sk-alice").json()
        assert own["aborted"] == [request_id]
        last = list(events)[-1]
    assert last["finished"] and last["choices"][0]["finish_reason"] == "FINISH_REASON_ABORT", last


def test_router_probes_need_no_key_and_fleet_operations_an_admin_key(secure):
    def call(method, path, key=None):
        headers = {"authorization": f"Bearer {key}"} if key else {}
        return requests.request(
            method, secure.rest_url + path, headers=headers, verify=str(secure.ca_cert), timeout=120
        )

    for method, path in (("GET", "/health"), ("GET", "/ping"), ("POST", "/ping"), ("GET", "/version")):
        assert call(method, path).status_code == 200, path
    assert call("GET", "/get_model_info").status_code == 401 and call("GET", "/get_model_info", "sk-alice").ok
    admin_only = [
        ("GET", "/loads"),
        ("GET", "/get_load"),
        ("GET", "/load"),
        ("GET", "/inference/v1/loads"),
        ("POST", "/flush_cache"),
        ("POST", "/reset_prefix_cache"),
        ("POST", "/inference/v1/reset_prefix_cache"),
        ("GET", "/kv_event_sources"),
    ]
    for method, path in admin_only:
        assert call(method, path).status_code == 401, path
        refused = call(method, path, "sk-alice")
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "NOT_PERMITTED", path
        assert call(method, path, "sk-ops").status_code == 200, path
    # The one-hop service reaches each engine replica directly, over mTLS.
    assert len(call("GET", "/loads", "sk-ops").json()["loads"]) == 2
