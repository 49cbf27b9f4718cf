"""One request's oversized answer or header costs that request alone, never the streams that share its connection
(issue 36): Envoy's HTTP/2 through oghttp2 with the limits of gateway/envoy.yaml.j2, against a real gRPC upstream
that answers too big on purpose (tests/gateway/misbehaving.py) and a real gRPC client multiplexing its calls."""

from __future__ import annotations

import threading

import grpc
import pytest
import requests

from scaleout.v1 import render_pb2
from tests.gateway.misbehaving import misbehaving_gateway

BYSTANDERS = 8


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with misbehaving_gateway(tmp_path_factory.mktemp("misbehaving")) as running:
        yield running


def _beside(rest: str, attack) -> tuple[object, list]:
    """The attack's answer and the bystanders' answers, all in flight on the gateway's one upstream connection."""
    answers: list = []

    def bystander():
        try:
            answers.append(requests.post(rest + "/tokenize/typed", json={"prompt": "hello"}, timeout=30).status_code)
        except requests.RequestException as error:
            answers.append(repr(error))

    threads = [threading.Thread(target=bystander) for _ in range(BYSTANDERS)]
    for thread in threads:
        thread.start()
    threading.Event().wait(0.5)  # the bystanders are waiting on the upstream when the attack comes
    outcome = attack()
    for thread in threads:
        thread.join(60)
    return outcome, answers


@pytest.mark.parametrize("size", [30_000, 70_000, 1_000_000, 12_000_000])
def test_an_oversized_error_trailer_resets_its_own_stream_only(gateway, size):
    rest, _ = gateway
    answer, bystanders = _beside(
        rest, lambda: requests.post(rest + "/tokenize/typed", json={"prompt": f"trailer:{size}"})
    )
    assert bystanders == [200] * BYSTANDERS, bystanders
    assert answer.status_code in (400, 503), answer.text[:200]  # its own error, or its own stream reset


def test_an_oversized_response_header_resets_its_own_stream_only(gateway):
    rest, _ = gateway

    def attack():
        try:  # passed on whole: then requests itself refuses a header line over 64 KiB
            return requests.post(rest + "/tokenize/typed", json={"prompt": "header:200000"}, timeout=30).status_code
        except requests.ConnectionError:
            return "refused by the client"

    answer, bystanders = _beside(rest, attack)
    assert bystanders == [200] * BYSTANDERS, bystanders
    assert answer in (503, "refused by the client"), answer


def test_100_kb_of_grpc_metadata_fails_only_its_own_call(gateway):
    _, target = gateway
    with grpc.insecure_channel(target) as channel:
        tokenize = channel.unary_unary(
            "/scaleout.v1.RenderService/Tokenize",
            request_serializer=render_pb2.TokenizeRequest.SerializeToString,
            response_deserializer=render_pb2.TokenizeResponse.FromString,
        )
        calls = [tokenize.future(render_pb2.TokenizeRequest(prompt="hello"), timeout=30) for _ in range(BYSTANDERS)]
        threading.Event().wait(0.5)
        with pytest.raises(grpc.RpcError) as refused:
            tokenize(render_pb2.TokenizeRequest(prompt="hi"), metadata=(("x-big", "a" * 100_000),), timeout=30)
        assert [call.result().count for call in calls] == [7] * BYSTANDERS
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "REQUEST_HEADERS_TOO_LARGE" in refused.value.details()


def test_a_header_the_services_would_refuse_is_a_431_at_the_door(gateway):
    rest, _ = gateway
    answer = requests.post(rest + "/tokenize/typed", json={"prompt": "hi"}, headers={"x-big": "a" * 60_000}, timeout=30)
    assert answer.status_code == 431 and answer.json()["error"]["code"] == "REQUEST_HEADERS_TOO_LARGE"
    assert answer.json()["error"]["type"] == "invalid_request_error"
    assert (
        requests.post(rest + "/tokenize/typed", json={"prompt": "hi"}, headers={"x-ok": "a" * 20_000}).status_code
        == 200
    )
