"""What a REST client sees of the gateway itself (issue 36): a method a path does not take is 405 in OpenAI's error
shape with Allow; Envoy's own 400s say what happened; successful answers carry no transcoder internals, and event
streams are never cached."""

from __future__ import annotations

import requests

from tests.gateway.rest import post

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def test_a_method_the_path_does_not_take_is_405_in_openais_shape(stack):
    for method, path, allow in (
        ("GET", "/v1/chat/completions", "POST"),
        ("OPTIONS", "/v1/chat/completions", "POST"),
        ("POST", "/v1/models", "GET"),
        ("PUT", "/v1/models/some/model", "GET"),
    ):
        answer = requests.request(method, stack.rest_url + path, timeout=30)
        assert answer.status_code == 405, (method, path, answer.text[:200])
        assert answer.headers["allow"] == allow
        error = answer.json()["error"]
        assert error["code"] == "METHOD_NOT_ALLOWED" and error["type"] == "invalid_request_error", error
    assert requests.get(stack.rest_url + "/v1/nowhere", timeout=30).status_code == 404


def test_envoys_own_400s_say_what_happened(stack):
    underscore = requests.post(stack.rest_url + "/tokenize", json={"prompt": "hi"}, headers={"x_bad": "1"}, timeout=30)
    assert underscore.status_code == 400
    error = underscore.json()["error"]
    assert error["code"] == "INVALID_HTTP" and "underscore" in error["message"], error
    broken = post(stack, "/tokenize", b'{"prompt": ')
    assert broken.status_code == 400 and broken.json()["error"]["code"] == "INVALID_JSON"


def test_success_answers_carry_no_transcoder_internals(stack):
    for answer in (post(stack, "/tokenize", {"prompt": "hi"}), post(stack, "/v1/chat/completions", CHAT)):
        assert answer.status_code == 200, answer.text[:200]
        assert not {"grpc-status", "grpc-message", "grpc-accept-encoding"} & set(answer.headers), answer.headers


def test_event_streams_are_never_cached(stack):
    for path, body in (
        ("/v1/chat/completions", {**CHAT, "stream": True}),
        ("/v1/messages", {**CHAT, "stream": True, "model": "SmolLM2-135M-Instruct"}),
        ("/inference/v1/generate/stream", {"token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 2}}),
    ):
        answer = post(stack, path, body)
        assert answer.status_code == 200, (path, answer.text[:200])
        assert answer.headers["content-type"].startswith("text/event-stream"), path
        assert answer.headers["cache-control"] == "no-cache", path
        assert "grpc-status" not in answer.headers


def test_a_path_variables_escaped_slash_is_a_slash(stack):
    """The OpenAI SDK sends `models.retrieve("org/name")` as /v1/models/org%2Fname (SGLang's test_retrieve_model
    with its served name meta-llama/Llama-3.2-1B-Instruct): the name render looks up is org/name."""
    answer = requests.get(stack.rest_url + "/v1/models/org%2Fname", timeout=30)
    assert answer.status_code == 404 and "'org/name'" in answer.json()["error"]["message"], answer.text
