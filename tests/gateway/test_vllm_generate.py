"""vLLM 0.33's `/inference/v1/generate` and `/server_info` through a real stack (real Envoy, services and default
model; the engine speculates with n-gram lookup), every answer parsed by vLLM's own pydantic classes from the
installed wheel (vllm.entrypoints.scale_out.token_in_token_out.protocol) and every request body one vLLM's
GenerateRequest accepts: unary and streamed, render's answer forwarded unchanged, and the refusals naming the field.
The mapping itself: pipeline_svc/faces/vllm_generate_request.py, vllm_generate_output.py."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
import requests

from devstack.stack import Stack, StackConfig
from tests.gateway.rest import error_reason, post, sse_events

protocol = pytest.importorskip(
    "vllm.entrypoints.scale_out.token_in_token_out.protocol", reason="vLLM 0.33's wheel (make setup installs it)"
)
pydantic = pytest.importorskip("pydantic")

pytestmark = pytest.mark.slow

SPECULATIVE = {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 1, "prompt_lookup_max": 3}
PROMPT = [
    504,
    3575,
    282,
    4649,
    314,
    7042,
    30,
    378,
    3575,
    282,
    4649,
    314,
]  # "The capital of France is Paris. The capital of France is"
UNARY = pydantic.TypeAdapter(protocol.GenerateResponse)
CHUNK = pydantic.TypeAdapter(protocol.GenerateStreamResponse)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    config = StackConfig(
        port=0,
        log_dir=tmp_path_factory.mktemp("vllm-generate-logs"),
        service_args={"engine": ["--speculative-config", json.dumps(SPECULATIVE)]},
    )
    with Stack(config) as running:
        yield running


def generate(stack, body: dict) -> requests.Response:
    protocol.GenerateRequest.model_validate(body)  # what we send is what vLLM takes
    return post(stack, "/inference/v1/generate", body)


def test_unary_is_vllms_generate_response(stack):
    sampling = {"temperature": 0, "max_tokens": 6, "logprobs": 2, "prompt_logprobs": 1}
    answer = generate(
        stack, {"request_id": "u1", "token_ids": PROMPT, "sampling_params": sampling, "return_token_ids": True}
    )
    assert answer.status_code == 200, answer.text
    parsed = UNARY.validate_python(answer.json())
    assert isinstance(parsed, protocol.GenerateTokensResponse) and parsed.request_id == "generate-tokens-u1"
    assert set(answer.json()) == set(protocol.GenerateTokensResponse.model_fields)  # every field, as vLLM dumps
    choice = parsed.choices[0]
    assert choice.finish_reason == "length" and choice.stop_reason is None and len(choice.token_ids) == 6
    typed = post(stack, "/inference/v1/generate/typed", {"token_ids": PROMPT, "sampling_params": sampling}).json()
    assert choice.token_ids == typed["choices"][0]["token_ids"]  # the same engine underneath
    content = choice.logprobs.content
    assert [c.token_id for c in content] == choice.token_ids and all(
        c.top_logprobs[0].token_id == c.token_id for c in content
    )
    assert all(c.rank == 1 and len(c.top_logprobs) == 2 for c in content)  # greedy: the sampled token is the top one
    assert parsed.prompt_token_ids == PROMPT and parsed.prompt_logprobs[0] is None and len(parsed.prompt_logprobs) == 12
    assert parsed.usage.prompt_tokens == 12 and parsed.usage.completion_tokens == 6 and parsed.usage.total_tokens == 18
    assert parsed.model == "SmolLM2-135M-Instruct" and parsed.output_mode == "tokens"
    assert choice.weight_versions[0].start == 0 and choice.weight_versions[-1].end == 6


def test_logprob_token_ids_are_each_tokens_alternatives(stack):
    """vLLM's logprob_token_ids: the sampled token, then the named ids (a repeated one once), in place of the top."""
    sampling = {"temperature": 0, "max_tokens": 2, "logprob_token_ids": [5000, 100, 5000], "allowed_token_ids": [42]}
    answer = generate(stack, {"token_ids": PROMPT, "sampling_params": sampling})
    assert answer.status_code == 200, answer.text
    choice = UNARY.validate_python(answer.json()).choices[0]
    for content in choice.logprobs.content:
        assert content.token_id == 42 and [t.token_id for t in content.top_logprobs] == [42, 5000, 100]
        assert all(-9999.0 <= t.logprob <= 0 for t in content.top_logprobs)


def test_prompt_token_id_logprobs_are_vllms_scores(stack):
    """vLLM's prompt_logprob_token_ids (its test_serving_tokens case): row i scores its ids as predictions of prompt
    token prompt_logprob_start + i + 1, as float32 .npy in base64, -inf in padded columns; unary only."""
    token_ids, rows = PROMPT[:5], [[PROMPT[2]], [PROMPT[3], 100], [PROMPT[4]]]
    sampling = {"max_tokens": 1, "prompt_logprobs": 0, "prompt_logprob_token_ids": rows, "prompt_logprob_start": 1}
    answer = generate(stack, {"token_ids": token_ids, "sampling_params": sampling})
    assert answer.status_code == 200, answer.text
    parsed = UNARY.validate_python(answer.json())
    scores = np.load(io.BytesIO(base64.b64decode(parsed.prompt_token_id_logprobs)))
    assert scores.shape == (3, 2) and scores.dtype == np.float32
    for row, target in enumerate(token_ids[2:]):
        assert scores[row, 0] == pytest.approx(parsed.prompt_logprobs[row + 2][target].logprob, abs=1e-3)
    assert np.isneginf(scores[[0, 2], 1]).all() and -30 < scores[1, 1] < 0
    streamed = {"token_ids": token_ids, "sampling_params": {"prompt_logprob_token_ids": rows}, "stream": True}
    refused = generate(stack, streamed)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "sampling_params.prompt_logprob_token_ids"
    too_few = generate(
        stack, {"token_ids": token_ids, "sampling_params": {**sampling, "prompt_logprob_token_ids": rows[:2]}}
    )
    assert too_few.status_code == 400 and "scored rows" in too_few.text


def test_stop_token_and_n(stack):
    first = generate(stack, {"token_ids": PROMPT, "sampling_params": {"temperature": 0, "max_tokens": 4}}).json()
    stop = first["choices"][0]["token_ids"][1]
    body = {"token_ids": PROMPT, "sampling_params": {"temperature": 0, "max_tokens": 4, "stop_token_ids": [stop]}}
    stopped = UNARY.validate_python(generate(stack, body).json()).choices[0]
    assert stopped.finish_reason == "stop" and stopped.stop_reason == stop and stopped.token_ids[-1] == stop
    many = {"token_ids": PROMPT, "sampling_params": {"n": 2, "seed": 7, "max_tokens": 3}}
    parsed = UNARY.validate_python(generate(stack, many).json())
    assert [c.index for c in parsed.choices] == [0, 1] and all(len(c.token_ids) == 3 for c in parsed.choices)


def test_stream_is_vllms_chunks_then_done(stack):
    body = {
        "token_ids": PROMPT,
        "sampling_params": {"temperature": 0, "max_tokens": 6, "logprobs": 0},
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "return_token_ids": True,
    }
    answer = generate(stack, body)
    assert answer.status_code == 200 and answer.text.endswith("data: [DONE]\n\n"), answer.text
    chunks = [CHUNK.validate_python(event) for event in sse_events(answer)]
    assert all(isinstance(c, protocol.GenerateTokensStreamResponse) for c in chunks)
    *tokens, usage = chunks
    assert tokens[0].prompt_token_ids == PROMPT and all(c.prompt_token_ids is None for c in tokens[1:])
    ids = [t for c in tokens for t in c.choices[0].token_ids]
    unary = generate(stack, body | {"stream": False}).json()
    assert ids == unary["choices"][0]["token_ids"]
    assert [c.choices[0].finish_reason for c in tokens] == [None] * (len(tokens) - 1) + ["length"]
    assert tokens[-1].choices[0].weight_versions and tokens[0].choices[0].weight_versions is None
    assert tokens[-1].usage.completion_tokens == 6  # continuous usage: the running count
    assert usage.choices == [] and usage.usage.total_tokens == 18
    assert all(len(c.choices[0].logprobs.content) == len(c.choices[0].token_ids) for c in tokens)


def test_renders_answer_goes_to_generate_unchanged(stack):
    chat = {"messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 5, "temperature": 0, "stop": ["\n\n"]}
    rendered = post(stack, "/v1/chat/completions/render", chat)
    assert rendered.status_code == 200, rendered.text
    answer = generate(stack, rendered.json())
    assert answer.status_code == 200, answer.text
    parsed = UNARY.validate_python(answer.json())
    assert parsed.choices[0].finish_reason in ("length", "stop") and parsed.choices[0].token_ids
    choice = chat | {"structured_outputs": {"choice": ["yes", "no"]}, "stop": []}
    constrained = UNARY.validate_python(
        generate(stack, post(stack, "/v1/chat/completions/render", choice).json()).json()
    )
    assert post(stack, "/detokenize", {"tokens": constrained.choices[0].token_ids}).json()["prompt"] in ("yes", "no")
    completion = post(stack, "/v1/completions/render", {"prompt": "The capital of France is", "max_tokens": 3}).json()
    streamed = generate(stack, completion[0] | {"stream": True})
    assert [CHUNK.validate_python(e) for e in sse_events(streamed)]


def test_bad_words_and_a_regex_are_compiled_by_render(stack):
    greedy = {"temperature": 0, "max_tokens": 3}
    plain = generate(stack, {"token_ids": PROMPT, "sampling_params": greedy}).json()["choices"][0]["token_ids"]
    assert post(stack, "/detokenize", {"tokens": plain}).json()["prompt"] == " not a country"
    banned = generate(stack, {"token_ids": PROMPT, "sampling_params": greedy | {"bad_words": ["not"]}}).json()
    assert post(stack, "/detokenize", {"tokens": banned["choices"][0]["token_ids"]}).json()["prompt"] == " Paris.\n"
    regex = greedy | {"max_tokens": 6, "structured_outputs": {"regex": "[0-9]{3}"}}
    answer = UNARY.validate_python(generate(stack, {"token_ids": PROMPT, "sampling_params": regex}).json())
    digits = post(stack, "/detokenize", {"tokens": answer.choices[0].token_ids}).json()["prompt"]
    assert len(digits) == 3 and digits.isdigit(), digits


def test_structured_outputs_from_the_first_token(stack):
    sampling = {"max_tokens": 8, "structured_outputs": {"choice": ["yes", "no"]}}
    body = {"token_ids": PROMPT, "sampling_params": sampling, "reasoning_ended": True}
    choice = UNARY.validate_python(generate(stack, body).json()).choices[0]
    text = post(stack, "/detokenize", {"tokens": choice.token_ids}).json()["prompt"]
    assert text in ("yes", "no") and choice.finish_reason == "stop"


@pytest.mark.parametrize(
    "body, field, status",
    [
        ({"features": {"mm_hashes": {}, "mm_placeholders": {}}}, "features", 400),
        ({"content_parts": [{"type": "image_url", "url": "x"}]}, "content_parts", 400),
        ({"output_mode": "text", "stream": True}, "stream", 400),  # the text level is unary here
        ({"output_mode": "bytes"}, "output_mode", 400),
        (
            {"output_mode": "derender", "parse_context": {"history_tool_call_cnt": 2}},
            "parse_context.history_tool_call_cnt",
            400,
        ),
        ({"ec_transfer_params": {"a": 1}}, "ec_transfer_params", 400),
        ({"sampling_params": {"thinking_token_budget": 5}}, "sampling_params.thinking_token_budget", 400),
        ({"sampling_params": {"structured_outputs": {"json": "{"}}}, "sampling_params.structured_outputs.json", 400),
        ({"sampling_params": {"logprobs": 2, "logprob_token_ids": [5]}}, "sampling_params.logprob_token_ids", 400),
        ({"sampling_params": {"prompt_logprob_token_ids": [[]]}}, "sampling_params.prompt_logprob_token_ids", 400),
        ({"sampling_params": {"prompt_logprob_start": 2}}, "sampling_params.prompt_logprob_start", 400),
        # -1, the whole vocabulary (49,152), is above --max-logprobs (20), as vLLM's SamplingParams refuses it
        ({"sampling_params": {"prompt_logprobs": -1}}, "sampling_params.prompt_logprobs", 400),
        ({"sampling_params": {"temperature": -1}}, "sampling_params.temperature", 400),
        ({"sampling_params": {"n": 0}}, "sampling_params.n", 400),
        ({"model": "gpt-9"}, "model", 404),
    ],
)
def test_refusals_name_the_field(stack, body, field, status):
    answer = post(stack, "/inference/v1/generate", {"token_ids": PROMPT, "sampling_params": {"max_tokens": 2}} | body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["param"] == field and {"message", "type", "param", "code"} <= set(error)


def test_unknown_fields_are_refused(stack):
    unknown = post(stack, "/inference/v1/generate", {"token_ids": PROMPT, "sampling_params": {}, "bogus": 1})
    assert unknown.status_code == 400 and error_reason(unknown) == "UNSUPPORTED_FIELD"
    nested = post(stack, "/inference/v1/generate", {"token_ids": PROMPT, "sampling_params": {"max_token": 1}})
    assert nested.status_code == 400 and nested.json()["error"]["param"] == "sampling_params.max_token"


def test_server_info_reports_the_engines_speculation(stack):
    info = requests.get(stack.rest_url + "/server_info?config_format=json", timeout=30).json()
    spec = info["vllm_config"]["speculative_config"]
    assert spec == {**SPECULATIVE, "model": "ngram", "draft_sample_method": "greedy"}
    text = requests.get(stack.rest_url + "/server_info", timeout=30).json()["vllm_config"]
    assert 'speculative_config={"method": "ngram"' in text


def test_abort_by_the_id_vllm_answers(stack):
    body = {"request_id": "ab1", "token_ids": PROMPT, "sampling_params": {"max_tokens": 3000, "ignore_eos": True}}
    with requests.post(
        stack.rest_url + "/inference/v1/generate", json=body | {"stream": True}, stream=True
    ) as streamed:
        events = (line[len(b"data: ") :] for line in streamed.iter_lines() if line.startswith(b"data: "))
        first = CHUNK.validate_json(next(events))
        aborted = post(stack, "/inference/v1/abort_requests", {"request_ids": [first.request_id]})
        assert aborted.status_code == 200 and first.request_id == "generate-tokens-ab1", aborted.text
        *chunks, done = list(events)
    assert done == b"[DONE]" and CHUNK.validate_json(chunks[-1]).choices[0].finish_reason == "abort"


def test_derender_takes_vllms_requests(stack):
    chat_protocol = pytest.importorskip("vllm.entrypoints.openai.chat_completion.protocol")
    completion_protocol = pytest.importorskip("vllm.entrypoints.openai.completion.protocol")
    chat = {
        "model": "SmolLM2-135M-Instruct",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
    }
    chat |= {"max_tokens": 8, "temperature": 0, "logprobs": True, "top_logprobs": 2}
    rendered = post(stack, "/v1/chat/completions/render", chat).json()
    generated = generate(stack, rendered | {"sampling_params": rendered["sampling_params"] | {"logprobs": 2}}).json()
    chat_request = chat_protocol.ChatCompletionRequest.model_validate(chat).model_dump(mode="json")
    ids = rendered["token_ids"]
    body = {
        "generate_response": generated,
        "chat_request": chat_request,
        "prompt_tokens": len(ids),
        "prompt_token_ids": ids,
    }
    protocol.DerenderChatRequest.model_validate(body)  # what vLLM's derender takes
    answer = post(stack, "/v1/chat/completions/derender", body)
    assert answer.status_code == 200, answer.text
    parsed = chat_protocol.ChatCompletionResponse.model_validate(answer.json())
    one_hop = post(stack, "/v1/chat/completions", chat).json()["choices"][0]
    assert parsed.choices[0].message.content == one_hop["message"]["content"] and parsed.id == generated["request_id"]
    assert parsed.usage.prompt_tokens == len(ids) and parsed.usage.completion_tokens == 8
    assert [len(c.top_logprobs) for c in parsed.choices[0].logprobs.content] == [2] * 8
    prompts = {"model": "SmolLM2-135M-Instruct", "prompt": ["The capital of France is", "One, two,"], "max_tokens": 4}
    answers = [
        generate(stack, r).json() for r in post(stack, "/v1/completions/render", prompts | {"temperature": 0}).json()
    ]
    completion_request = completion_protocol.CompletionRequest.model_validate(prompts | {"temperature": 0})
    body = {"generate_responses": answers, "completion_request": completion_request.model_dump(mode="json")}
    answer = post(stack, "/v1/completions/derender", body)
    texts = [c.text for c in completion_protocol.CompletionResponse.model_validate(answer.json()).choices]
    one_hop = post(stack, "/v1/completions", prompts | {"temperature": 0}).json()["choices"]
    assert texts == [c["text"] for c in one_hop]
    # `stream: true` is the per-chunk form (tests/gateway/test_vllm_scale_out.py): a whole answer is not its field
    refused = post(stack, "/v1/chat/completions/derender", {"generate_response": generated, "stream": True})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "generate_response"
    plain = post(stack, "/v1/chat/completions/derender", {"generate_response": generated})  # vLLM's defaults
    assert plain.status_code == 200, plain.text
    assert plain.json()["choices"][0]["message"]["content"]  # plain detokenization: no tools, no stops


def test_text_and_derender_levels_carry_the_one_hops_text(stack):
    """vLLM's `output_mode`: "text" decodes each choice as the chat route does for the same tokens; "derender"
    gives the assistant message (the render answer's context: no parser for this model, so its text)."""
    chat = {
        "model": "SmolLM2-135M-Instruct",
        "messages": [{"role": "user", "content": "Name a colour."}],
        "max_tokens": 8,
    }
    rendered = post(stack, "/v1/chat/completions/render", chat | {"temperature": 0, "logprobs": True}).json()
    one_hop = post(stack, "/v1/chat/completions", chat | {"temperature": 0}).json()["choices"][0]["message"]
    for mode in ("text", "derender"):
        answer = post(stack, "/inference/v1/generate", rendered | {"output_mode": mode})
        assert answer.status_code == 200, answer.text
        choice = answer.json()["choices"][0]
        text = choice["text"] if mode == "text" else choice["message"]["content"]
        assert answer.json()["output_mode"] == mode and text == one_hop["content"]
        assert choice["token_ids"] and choice["logprobs"]["content"][0]["token"]  # decoded, with bytes
    body = rendered | {"output_mode": "text", "sampling_params": rendered["sampling_params"] | {"detokenize": False}}
    refused = post(stack, "/inference/v1/generate", body)
    assert refused.status_code == 400 and "requires sampling_params.detokenize" in refused.json()["error"]["message"]
