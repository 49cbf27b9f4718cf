"""A typed REST route's body naming a field its message does not define is refused (400 UNSUPPORTED_FIELD, the
field's path as `param`), where Envoy's transcoder alone would drop it and answer 200 (gateway/json_fields.py);
the names protobuf's JSON takes (proto and lowerCamel), maps' free keys and Struct values still pass."""

from __future__ import annotations

import pytest

from gateway.envoy_config import SERVICES
from gateway.json_fields import guarded_routes
from tests.gateway.rest import error_reason, post

GENERATE = {"token_ids": [28120, 905], "sampling_params": {"max_tokens": 2, "temperature": 0}}


def test_every_typed_body_route_is_guarded_and_no_httpbody_route_is():
    routes, messages = guarded_routes(service for services in SERVICES.values() for service in services)
    assert routes["/inference/v1/generate/typed"] == "scaleout.v1.GenerateRequest"
    assert routes["/v1/chat/completions/render_batch"] == "scaleout.v1.RenderChatBatchRequest"
    assert "/v1/chat/completions" not in routes and "/generate" not in routes  # HttpBody: parsed by their faces
    sampling = messages["scaleout.v1.SamplingParams"]
    assert sampling["max_tokens"] == sampling["maxTokens"] == "" and sampling["logit_bias"] == "map:"
    assert messages["scaleout.v1.GenerateRequest"]["kv_transfer_params"] == "*"  # a Struct: any names


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/inference/v1/generate/typed", GENERATE | {"bogus": 1}, "bogus"),
        ("/inference/v1/generate/typed", GENERATE | {"stream": True}, "stream"),
        (
            "/inference/v1/generate/typed",
            {**GENERATE, "sampling_params": {"max_token": 2}},
            "sampling_params.max_token",
        ),
        ("/v1/chat/completions/render_batch", {"requests": [{}, {"modle": "x"}]}, "requests[1].modle"),
        ("/inference/v1/generate/typed", GENERATE | {"x" * 500: 1}, "x" * 120 + "..."),
    ],
    ids=["top", "vllm-stream", "nested", "in-a-list", "clipped"],
)
def test_unknown_fields_are_refused_naming_them(stack, path, body, field):
    answer = post(stack, path, body)
    assert answer.status_code == 400, answer.text[:300]
    assert error_reason(answer) == "UNSUPPORTED_FIELD" and answer.json()["error"]["param"] == field


@pytest.mark.slow
def test_known_names_in_either_spelling_maps_and_structs_pass(stack):
    camel = {"tokenIds": [28120, 905], "samplingParams": {"maxTokens": 2, "temperature": 0, "logitBias": {"5": 1}}}
    assert post(stack, "/inference/v1/generate/typed", camel).status_code == 200
    assert post(stack, "/inference/v1/generate/typed", GENERATE).status_code == 200
    # A Struct's names pass the guard: the engine reads them itself, and names the one it does not know.
    struct = post(stack, "/inference/v1/generate/typed", camel | {"kvTransferParams": {"anything": {"goes": [1]}}})
    assert struct.status_code == 400 and "kv_transfer_params.anything" in struct.json()["error"]["message"]
    assert post(stack, "/inference/v1/generate/typed", "not json").status_code == 400  # the transcoder's own refusal
