"""vLLM 0.33's scale-out routes beyond generate, through the shared stack (tests/conftest.py: real Envoy, services,
default model): the per-chunk streaming derender (one call per `/inference/v1/generate` SSE chunk, vLLM's
`stream_state` carried by the client), and vLLM's ErrorResponse on these routes. Every request body is one vLLM's
own request model takes and dumps, every answer is parsed by vLLM's own response models (the installed wheel). The
mapping: pipeline_svc/faces/vllm_derender_stream.py, scaleout_common/openai_errors.py (VLLM_PATHS)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

from tests.gateway.rest import detail_reason, post

protocol = pytest.importorskip(
    "vllm.entrypoints.scale_out.token_in_token_out.protocol", reason="vLLM 0.33's wheel (make setup installs it)"
)
chat_protocol = pytest.importorskip("vllm.entrypoints.openai.chat_completion.protocol")
completion_protocol = pytest.importorskip("vllm.entrypoints.openai.completion.protocol")
engine_protocol = pytest.importorskip("vllm.entrypoints.serve.engine.protocol")

pytestmark = pytest.mark.slow

MODEL = "SmolLM2-135M-Instruct"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "What is the capital of France?"}]}
CHAT |= {"max_tokens": 10, "temperature": 0, "logprobs": True, "top_logprobs": 2, "return_token_ids": True}
COMPLETION = {"model": MODEL, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, "logprobs": 1}
# vLLM's own per-chunk derender of this stack's generate chunks (record_vllm_derender_stream.py)
RECORDED = json.loads(Path(__file__).with_name("vllm_derender_stream_answers.json").read_text())


def generate_chunks(stack, rendered: dict) -> list[dict]:
    """`/inference/v1/generate`'s SSE chunks for render's answer, streamed with usage, as vLLM's client reads them."""
    body = rendered | {"stream": True, "stream_options": {"include_usage": True}}
    protocol.GenerateRequest.model_validate(body)
    answer = requests.post(stack.rest_url + "/inference/v1/generate", json=body, timeout=120)
    data = [line[len("data: ") :] for line in answer.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]", answer.text
    return [protocol.GenerateTokensStreamResponse.model_validate_json(d).model_dump(mode="json") for d in data[:-1]]


def derender_stream(stack, path: str, chunks: list[dict], request_model, response_model, **fields) -> list:
    """One derender call per chunk, each carrying the state the last answered, as vLLM's client does."""
    state, out = None, []
    for chunk in chunks:
        body = request_model(stream=True, generate_chunk=chunk, stream_state=state, **fields).model_dump(mode="json")
        answer = post(stack, path, body)
        assert answer.status_code == 200, answer.text
        parsed = response_model.model_validate(answer.json())
        out.append(parsed.chunk)
        state = parsed.stream_state
    return out


@pytest.mark.parametrize("stop", [None, ["capital of"]], ids=["plain", "stop-string-across-chunks"])
def test_chat_derendered_chunk_by_chunk_is_the_whole_answer(stack, stop):
    asked = CHAT | ({"stop": stop} if stop else {})
    rendered = post(stack, "/v1/chat/completions/render", asked).json()
    chunks = generate_chunks(stack, rendered)
    chat_request = chat_protocol.ChatCompletionRequest.model_validate(asked)
    derendered = derender_stream(
        stack,
        "/v1/chat/completions/derender",
        chunks,
        protocol.DerenderChatStreamRequest,
        protocol.DerenderChatStreamResponse,
        chat_request=chat_request,
        prompt_tokens=len(rendered["token_ids"]),
        prompt_token_ids=rendered["token_ids"],
    )
    choices = [c.choices[0] for c in derendered if c.choices]
    assert [c.delta.role for c in choices] == ["assistant"] + [None] * (len(choices) - 1)
    one_hop = post(stack, "/v1/chat/completions", asked).json()["choices"][0]
    assert "".join(c.delta.content or "" for c in choices) == one_hop["message"]["content"]
    assert choices[-1].stop_reason == one_hop["stop_reason"] and (stop is None or one_hop["stop_reason"] == stop[0])
    assert choices[-1].finish_reason == one_hop["finish_reason"]
    assert [t for c in choices for t in c.token_ids] == one_hop["token_ids"]
    assert all(len(e.top_logprobs) == 2 for c in choices if c.logprobs for e in c.logprobs.content)
    assert sum(len(c.logprobs.content) for c in choices if c.logprobs) == len(one_hop["token_ids"])
    assert {c.id for c in derendered} == {chunks[0]["request_id"]}
    assert derendered[0].prompt_token_ids == rendered["token_ids"]  # return_token_ids: the chunk's prompt ids
    usage = derendered[-1].usage
    assert not derendered[-1].choices and usage.prompt_tokens == len(rendered["token_ids"])
    assert usage.completion_tokens == len(one_hop["token_ids"])


def test_completion_derendered_chunk_by_chunk_is_the_whole_answer(stack):
    (rendered,) = post(stack, "/v1/completions/render", COMPLETION).json()
    chunks = generate_chunks(stack, rendered)
    derendered = derender_stream(
        stack,
        "/v1/completions/derender",
        chunks,
        protocol.DerenderCompletionStreamRequest,
        protocol.DerenderCompletionStreamResponse,
        completion_request=completion_protocol.CompletionRequest.model_validate(COMPLETION),
    )
    choices = [c.choices[0] for c in derendered if c.choices]
    one_hop = post(stack, "/v1/completions", COMPLETION).json()["choices"][0]
    assert "".join(c.text for c in choices) == one_hop["text"]
    offsets = [o for c in choices for o in c.logprobs.text_offset]
    tokens = [t for c in choices for t in c.logprobs.tokens]
    assert offsets == [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]  # absolute, as vLLM's
    assert choices[-1].finish_reason == one_hop["finish_reason"]


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_per_chunk_answers_are_vllms_own(stack, name):
    """The chunks vLLM's own server answered for the same generate chunks, field for field once parsed by its
    models (`created` aside; our extra `matched_stop`); the chat state is vLLM's too (its parser path replays)."""
    recorded = RECORDED[name]
    response_model = {"chat": protocol.DerenderChatStreamResponse}.get(name, protocol.DerenderCompletionStreamResponse)

    def normal(answer: dict) -> dict:
        parsed = response_model.model_validate(answer).model_dump(mode="json", exclude={"chunk": {"created"}})
        for choice in parsed["chunk"]["choices"]:
            choice.pop("matched_stop", None)
        return parsed if name == "chat" else parsed["chunk"]  # completions: vLLM's plain-detok state is its own

    state = None
    for chunk, theirs in zip(recorded["chunks"], recorded["vllm"], strict=True):
        body = {"stream": True, "generate_chunk": chunk, "stream_state": state, **recorded["fields"]}
        answer = post(stack, recorded["path"], body)
        assert answer.status_code == 200, answer.text
        assert normal(answer.json()) == normal(theirs)
        state = answer.json()["stream_state"]


def test_stream_refusals_name_the_field(stack):
    rendered = post(stack, "/v1/chat/completions/render", CHAT | {"max_tokens": 2}).json()
    chunk = generate_chunks(stack, rendered)[0]
    chat_request = chat_protocol.ChatCompletionRequest.model_validate(CHAT).model_dump(mode="json")
    base = {"stream": True, "generate_chunk": chunk, "chat_request": chat_request}
    cases = [
        ({"stream_state": {"prev_tokens": ["a"]}}, "stream_state.prev_tokens"),
        ({"stream_state": {"output_token_ids": [1, 2], "output_chunk_lens": [1]}}, "stream_state.output_chunk_lens"),
        ({"generate_chunk": chunk | {"choices": chunk["choices"] * 2}}, "generate_chunk.choices"),
        ({"stream": "yes"}, "stream"),
        ({"bogus": 1}, "bogus"),
    ]
    for extra, field in cases:
        answer = post(stack, "/v1/chat/completions/derender", base | extra)
        assert answer.status_code == 400, (field, answer.text)
        error = engine_protocol.ErrorResponse.model_validate(answer.json()).error
        assert (error.param, error.code, error.type) == (field, 400, "BadRequestError"), answer.text


def test_errors_on_vllms_routes_are_vllms_error_response(stack):
    unknown = post(stack, "/inference/v1/generate", {"token_ids": [1], "sampling_params": {}, "model": "gpt-9"})
    error = engine_protocol.ErrorResponse.model_validate(unknown.json()).error
    assert (unknown.status_code, error.code, error.type, error.param) == (404, 404, "NotFoundError", "model")
    assert detail_reason(unknown.json()["error"]) == "MODEL_NOT_FOUND"
    wrong_method = requests.get(stack.rest_url + "/v1/chat/completions/render", timeout=30)  # Envoy's own reply
    error = engine_protocol.ErrorResponse.model_validate(wrong_method.json()).error
    assert (wrong_method.status_code, error.code) == (405, 405)
    assert detail_reason(wrong_method.json()["error"]) == "METHOD_NOT_ALLOWED"
    for path, body in (
        ("/v1/chat/completions/render", {"messages": "x"}),
        ("/v1/completions/render", {"prompt": "hi", "bogus": 1}),
        ("/v1/completions/derender", {"generate_responses": []}),
    ):
        answer = post(stack, path, body)
        error = engine_protocol.ErrorResponse.model_validate(answer.json()).error
        assert answer.status_code == error.code == 400 and error.type == "BadRequestError", (path, answer.text)
    ours = post(stack, "/v1/chat/completions", {"messages": "x"}).json()["error"]  # our own routes keep theirs
    assert isinstance(ours["code"], str) and ours["type"] == "invalid_request_error", json.dumps(ours)


def test_messages_and_responses_render_answer_vllms_generate_request(stack):
    messages = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "Capital of France?"}]}
    responses = {"model": MODEL, "input": "Capital of France?", "max_output_tokens": 8}
    for path, body, prefix in (
        ("/v1/messages/render", messages, "chatcmpl-"),
        ("/v1/responses/render", responses, "resp_"),
    ):
        answer = post(stack, path, body)
        assert answer.status_code == 200, answer.text
        rendered = protocol.GenerateRequest.model_validate(answer.json())
        typed = post(stack, path + "/typed", body).json()["generate_request"]
        assert rendered.token_ids == typed["token_ids"] and rendered.request_id.startswith(prefix)
        assert rendered.sampling_params.max_tokens == 8
        generated = post(stack, "/inference/v1/generate", answer.json())  # forwarded unchanged, as llm-d does
        assert generated.status_code == 200, (path, generated.text)
        choice = protocol.GenerateTokensResponse.model_validate(generated.json()).choices[0]
        assert 0 < len(choice.token_ids) <= 8
    assert post(stack, "/v1/responses/render", responses).json()["parse_context"] is None  # as vLLM's
    refused = post(stack, "/v1/messages/render", messages | {"max_tokens": None})
    error = engine_protocol.ErrorResponse.model_validate(refused.json()).error
    assert (refused.status_code, error.code, error.param) == (400, 400, "max_tokens"), refused.text
    typed_refused = post(stack, "/v1/messages/render/typed", messages | {"max_tokens": None}).json()
    assert typed_refused["type"] == "error" and typed_refused["error"]["code"] == "INVALID_REQUEST"  # Anthropic's
