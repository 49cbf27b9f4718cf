"""The official `openai` Python SDK against the gateway, as a user points it there (`base_url=.../v1`).

Every object the SDK hands back is validated with the SDK's own pydantic models in strict mode. Greedy requests
(`temperature=0`) make streamed and unary answers comparable token for token.
"""

from __future__ import annotations

import json

import openai
import pydantic
import pytest
from openai.types import Completion, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ParsedChatCompletion

from tests.clients.prompts import COUNT, WEATHER, WEATHER_TOOLS, WEATHER_TWO_CITIES
from tests.clients.schemas import strict, strict_completion_chunk
from tests.gateway.rest import post

pytestmark = pytest.mark.slow

SHORT = [{"role": "user", "content": "What is 2+2?"}]
PROMPT = "The cat sat on the mat. The cat"


class GetWeather(pydantic.BaseModel):
    """Get the current weather in a city."""

    city: str


def _stream(client, **kwargs) -> list[ChatCompletionChunk]:
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    for chunk in chunks:
        strict(ChatCompletionChunk, chunk)
    return chunks


def _counts(usage) -> tuple[int, int, int]:
    """Token counts; `prompt_tokens_details.cached_tokens` depends on what ran before (prefix caching)."""
    return usage.prompt_tokens, usage.completion_tokens, usage.total_tokens


def _streamed_text(chunks, index: int = 0) -> str:
    return "".join(c.delta.content or "" for chunk in chunks for c in chunk.choices if c.index == index)


# ---------------------------------------------------------------------------------------------------- models


def test_models_list_and_retrieve(client, model_id):
    listed = client.models.list()
    assert listed.data and all(strict(Model, m).object == "model" for m in listed.data)
    got = client.models.retrieve(model_id)
    strict(Model, got)
    assert (got.id, got.object) == (model_id, "model")
    assert got.owned_by and got.created > 0


# ------------------------------------------------------------------------------------------------------ chat


def test_every_answer_names_its_request(client, model_id):
    """x-request-id on every response, as OpenAI sends it: the SDK hands it on as `_request_id`."""
    raw = client.chat.completions.with_raw_response.create(model=model_id, messages=SHORT, max_tokens=2)
    assert raw.headers["x-request-id"] and raw.parse()._request_id == raw.headers["x-request-id"]
    with client.chat.completions.with_streaming_response.create(
        model=model_id, messages=SHORT, max_tokens=2, stream=True
    ) as streamed:
        assert streamed.headers["x-request-id"] not in ("", raw.headers["x-request-id"])


def test_chat_unary_text(client, model_id):
    answer = client.chat.completions.create(model=model_id, messages=COUNT, max_tokens=8, temperature=0)
    strict(ChatCompletion, answer)
    assert answer.object == "chat.completion" and answer.model == model_id and answer.id
    (choice,) = answer.choices
    assert choice.index == 0 and choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content
    assert choice.message.tool_calls is None and choice.logprobs is None
    assert choice.finish_reason in ("stop", "length")
    usage = answer.usage
    assert 0 < usage.completion_tokens <= 8 and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_chat_stream_yields_the_unary_answer_token_by_token(client, model_id):
    request = dict(model=model_id, messages=COUNT, max_tokens=12, temperature=0)
    unary = client.chat.completions.create(**request)
    chunks = _stream(client, **request)
    assert len(chunks) > 3, "the answer came in one piece, not token by token"
    assert {c.id for c in chunks} == {chunks[0].id} and {c.object for c in chunks} == {"chat.completion.chunk"}
    assert all(c.usage is None for c in chunks)  # no include_usage: no usage anywhere
    choices = [c.choices[0] for c in chunks]
    assert choices[0].delta.role == "assistant" and all(c.delta.role is None for c in choices[1:])
    assert all(c.finish_reason is None for c in choices[:-1])
    assert choices[-1].finish_reason == unary.choices[0].finish_reason
    assert _streamed_text(chunks) == unary.choices[0].message.content


def test_chat_stream_include_usage(client, model_id):
    request = dict(model=model_id, messages=COUNT, max_tokens=6, temperature=0)
    unary = client.chat.completions.create(**request)
    chunks = _stream(client, stream_options={"include_usage": True}, **request)
    *tokens, last = chunks
    assert last.choices == [] and last.usage is not None
    assert _counts(last.usage) == _counts(unary.usage)
    assert tokens and all(c.choices and c.usage is None for c in tokens)


def test_stream_obfuscation_off_is_what_we_do_and_on_is_refused(client, model_id):
    request = dict(model=model_id, messages=COUNT, max_tokens=3, temperature=0)
    chunks = _stream(client, stream_options={"include_usage": True, "include_obfuscation": False}, **request)
    assert chunks[-1].usage is not None
    error = _error(lambda: _stream(client, stream_options={"include_obfuscation": True}, **request))
    assert (error.status_code, error.code, error.param) == (
        400,
        "UNSUPPORTED_FIELD",
        "stream_options.include_obfuscation",
    )


def test_chat_stream_helper_assembles_text(client, model_id):
    # an answer that ends by itself: the helper refuses to assemble one cut at max_tokens (LengthFinishReasonError)
    request = dict(model=model_id, messages=SHORT, max_tokens=40, temperature=0)
    unary = client.chat.completions.create(**request)
    with client.chat.completions.stream(**request) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    strict(ParsedChatCompletion[None], final)
    strict(ChatCompletion, final)
    done = [e for e in events if e.type == "content.done"]
    assert len(done) == 1 and done[0].content == unary.choices[0].message.content
    assert final.choices[0].message.content == unary.choices[0].message.content


def test_stop_reason_is_null_when_the_model_ends_by_eos(client, model_id):
    """vLLM's `stop_reason`: the matched stop string or stop token id, null when the model's EOS ended it."""
    request = dict(model=model_id, messages=SHORT, max_tokens=40, temperature=0)
    unary = client.chat.completions.create(**request).choices[0]
    streamed = _stream(client, **request)[-1].choices[0]
    assert unary.finish_reason == streamed.finish_reason == "stop"
    assert unary.model_dump()["stop_reason"] is None and streamed.model_dump()["stop_reason"] is None


def test_chat_n2_unary_and_stream(client, model_id):
    unary = client.chat.completions.create(model=model_id, messages=COUNT, max_tokens=4, n=2)
    strict(ChatCompletion, unary)
    assert [c.index for c in unary.choices] == [0, 1]
    assert all(c.message.content for c in unary.choices)

    chunks = _stream(client, model=model_id, messages=COUNT, max_tokens=4, n=2, stream_options={"include_usage": True})
    per_index: dict[int, list] = {0: [], 1: []}
    assert all(len(chunk.choices) == 1 for chunk in chunks[:-1])  # one choice per chunk, as OpenAI and vLLM
    for chunk in chunks[:-1]:
        for choice in chunk.choices:
            per_index[choice.index].append(choice)
    for choices in per_index.values():
        assert choices[0].delta.role == "assistant" and all(c.delta.role is None for c in choices[1:])
        assert [c.finish_reason is not None for c in choices] == [False] * (len(choices) - 1) + [True]
    assert chunks[-1].choices == [] and 0 < chunks[-1].usage.completion_tokens <= 8


def test_chat_logprobs_unary_and_stream(client, model_id):
    request = dict(model=model_id, messages=COUNT, max_tokens=6, temperature=0, logprobs=True, top_logprobs=3)
    unary = client.chat.completions.create(**request)
    strict(ChatCompletion, unary)
    (choice,) = unary.choices
    entries = choice.logprobs.content
    assert len(entries) == unary.usage.completion_tokens == 6
    assert "".join(e.token for e in entries) == choice.message.content
    for entry in entries:
        assert entry.bytes == list(entry.token.encode())
        assert len(entry.top_logprobs) == 3
        ranked = [t.logprob for t in entry.top_logprobs]
        assert ranked == sorted(ranked, reverse=True)
        # greedy: the chosen token is the most likely one
        assert entry.top_logprobs[0].token == entry.token
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob)

    chunks = _stream(client, **request)
    streamed = [e for chunk in chunks for c in chunk.choices if c.logprobs for e in c.logprobs.content]
    assert [e.token for e in streamed] == [e.token for e in entries]
    assert [e.logprob for e in streamed] == pytest.approx([e.logprob for e in entries], abs=1e-3)


def test_chat_tool_call_unary(client, model_id):
    answer = client.chat.completions.create(
        model=model_id, messages=WEATHER, tools=WEATHER_TOOLS, max_tokens=40, temperature=0
    )
    strict(ChatCompletion, answer)
    (choice,) = answer.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}


def test_chat_tool_call_stream_deltas(client, model_id):
    chunks = _stream(client, model=model_id, messages=WEATHER, tools=WEATHER_TOOLS, max_tokens=40, temperature=0)
    deltas = [call for chunk in chunks for c in chunk.choices for call in c.delta.tool_calls or []]
    assert deltas, "no tool call was streamed"
    first, *rest = deltas
    assert first.index == 0 and first.id and first.type == "function" and first.function.name == "get_weather"
    # a call's id, type and name ride on its first delta only
    assert all(d.id is None and d.type is None and d.function.name is None for d in rest)
    assert json.loads("".join(d.function.arguments or "" for d in deltas)) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert all(c.delta.content is None for chunk in chunks for c in chunk.choices)


def test_chat_stream_helper_assembles_tool_calls(client, model_id):
    tool = openai.pydantic_function_tool(GetWeather, name="get_weather")
    with client.chat.completions.stream(
        model=model_id, messages=WEATHER, tools=[tool], max_tokens=40, temperature=0
    ) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    strict(ParsedChatCompletion[None], final)
    strict(ChatCompletion, final)
    done = [e for e in events if e.type == "tool_calls.function.arguments.done"]
    assert [(e.name, e.parsed_arguments) for e in done] == [("get_weather", GetWeather(city="Paris"))]
    (choice,) = final.choices
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and call.function.parsed_arguments == GetWeather(city="Paris")


def test_chat_stream_helper_assembles_parallel_tool_calls(client, model_id):
    with client.chat.completions.stream(
        model=model_id, messages=WEATHER_TWO_CITIES, tools=WEATHER_TOOLS, max_tokens=60, temperature=0
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    strict(ChatCompletion, final)
    calls = final.choices[0].message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Berlin"}),
    ]
    assert len({c.id for c in calls}) == 2


# ----------------------------------------------------------------------------------------------- completions


def _token_ids(stack, text: str) -> list[int]:
    answer = post(stack, "/tokenize", {"prompt": text, "add_special_tokens": False})
    assert answer.status_code == 200, answer.text
    return answer.json()["tokens"]


SECOND_PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def greedy_references(client, model_id) -> list:
    """Each prompt's greedy answer, asked as a plain string."""
    return [
        client.completions.create(model=model_id, prompt=p, max_tokens=6, temperature=0)
        for p in (PROMPT, SECOND_PROMPT)
    ]


@pytest.mark.parametrize("form", ["string", "strings", "token ids", "lists of token ids"])
def test_completions_unary_and_stream(client, model_id, stack, greedy_references, form):
    """Every prompt form gives each prompt's greedy answer, unary and streamed."""
    prompt = {
        "string": PROMPT,
        "strings": [PROMPT, SECOND_PROMPT],
        "token ids": _token_ids(stack, PROMPT),
        "lists of token ids": [_token_ids(stack, PROMPT), _token_ids(stack, SECOND_PROMPT)],
    }[form]
    references = greedy_references[: 2 if form in ("strings", "lists of token ids") else 1]
    request = dict(model=model_id, prompt=prompt, max_tokens=6, temperature=0)
    unary = client.completions.create(**request)
    strict(Completion, unary)
    assert unary.object == "text_completion" and unary.model == model_id
    assert [c.index for c in unary.choices] == list(range(len(references)))
    assert [c.text for c in unary.choices] == [r.choices[0].text for r in references]
    assert unary.usage.prompt_tokens == sum(r.usage.prompt_tokens for r in references)
    assert unary.usage.completion_tokens == sum(r.usage.completion_tokens for r in references)

    chunks = list(client.completions.create(stream=True, stream_options={"include_usage": True}, **request))
    for chunk in chunks:
        strict_completion_chunk(chunk)
    *tokens, last = chunks
    assert last.choices == [] and _counts(last.usage) == _counts(unary.usage)
    assert all(c.usage is None for c in tokens)
    for choice in unary.choices:
        pieces = [c for chunk in tokens for c in chunk.choices if c.index == choice.index]
        assert len(pieces) > 1, "the answer came in one piece, not token by token"
        assert "".join(c.text for c in pieces) == choice.text
        assert [c.finish_reason for c in pieces] == [None] * (len(pieces) - 1) + [choice.finish_reason]


def test_completions_logprobs(client, model_id):
    answer = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=5, temperature=0, logprobs=2)
    strict(Completion, answer)
    logprobs = answer.choices[0].logprobs
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.text_offset) == 5
    assert "".join(logprobs.tokens) == answer.choices[0].text
    assert all(len(top) == 2 and top[token] == pytest.approx(lp) for token, lp, top in _rows(logprobs))


@pytest.mark.parametrize("stream", [False, True])
def test_completions_echo_scores_the_prompt(client, model_id, stack, stream):
    """echo with logprobs scores the echoed prompt too, as OpenAI and vLLM do (lm-evaluation-harness reads a
    loglikelihood as sum(token_logprobs[ctxlen:-1])): the prompt's tokens come first, the very first with null."""
    ids = _token_ids(stack, PROMPT)
    request = dict(model=model_id, prompt=PROMPT, max_tokens=1, temperature=0, logprobs=1, echo=True)
    if stream:
        chunks = list(client.completions.create(stream=True, **request))
        text = "".join(c.choices[0].text for c in chunks)
        logprobs = chunks[0].choices[0].logprobs
        assert len(logprobs.tokens) == len(ids) + 1  # the echo and the first token arrive together
    else:
        # Not `strict`: the SDK types token_logprobs as floats, while OpenAI and vLLM send the first echoed one as
        # null (which the SDK hands on as None).
        answer = client.completions.create(**request)
        text, logprobs = answer.choices[0].text, answer.choices[0].logprobs
    assert text.startswith(PROMPT) and "".join(logprobs.tokens) == text
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.top_logprobs) == len(ids) + 1
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None
    assert all(lp <= 0 for lp in logprobs.token_logprobs[1:]) and all(len(t) >= 1 for t in logprobs.top_logprobs[1:])
    assert logprobs.text_offset[0] == 0 and logprobs.text_offset[len(ids)] == len(PROMPT)
    assert logprobs.text_offset == sorted(logprobs.text_offset)
    # The prompt's last token scored as if sampled after the rest: the same logprob as a generation sees.
    before = client.completions.create(model=model_id, prompt=ids[:-1], max_tokens=1, temperature=0, logprobs=5)
    alternatives = before.choices[0].logprobs.top_logprobs[0]
    last = logprobs.tokens[len(ids) - 1]
    assert last in alternatives and logprobs.token_logprobs[len(ids) - 1] == pytest.approx(alternatives[last], abs=2e-3)


def _rows(logprobs):
    return zip(logprobs.tokens, logprobs.token_logprobs, logprobs.top_logprobs)


# ---------------------------------------------------------------------------------------------------- errors


def _error(call) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as caught:
        call()
    error = caught.value
    body = error.response.json()["error"]  # the raw body, as every OpenAI client parses it
    assert {"message", "type", "param", "code"} <= set(body) and body["message"]
    assert (error.code, error.param, error.type) == (body["code"], body["param"], body["type"])
    assert error.message == f"Error code: {error.status_code} - {body['message']}"
    assert error.request_id and error.request_id == error.response.headers["x-request-id"]
    return error


@pytest.mark.parametrize("stream", [False, True])
def test_error_bad_temperature(client, model_id, stream):
    error = _error(
        lambda: client.chat.completions.create(
            model=model_id, messages=COUNT, temperature=-1, max_tokens=2, stream=stream
        )
    )
    assert isinstance(error, openai.BadRequestError)
    assert (error.status_code, error.code, error.param, error.type) == (
        400,
        "INVALID_SAMPLING_PARAM",
        "temperature",
        "invalid_request_error",
    )


def test_error_unknown_field(client, model_id):
    error = _error(
        lambda: client.chat.completions.create(
            model=model_id, messages=COUNT, max_tokens=2, extra_body={"no_such_field": 1}
        )
    )
    assert (error.status_code, error.code, error.param, error.type) == (
        400,
        "UNSUPPORTED_FIELD",
        "no_such_field",
        "invalid_request_error",
    )


def test_thinking_token_budget_is_vllms_and_checked(client, model_id):
    """vLLM's extra field: SmolLM2 has no reasoning format, so nothing is reasoned and the cap holds as is."""
    answer = client.chat.completions.create(
        model=model_id, messages=COUNT, max_tokens=2, extra_body={"thinking_token_budget": 8}
    )
    assert answer.choices[0].message.content
    error = _error(
        lambda: client.chat.completions.create(
            model=model_id, messages=COUNT, max_tokens=2, extra_body={"thinking_token_budget": -1}
        )
    )
    assert (error.status_code, error.code, error.param) == (400, "INVALID_SAMPLING_PARAM", "thinking_token_budget")


@pytest.mark.parametrize("route", ["chat", "chat stream", "completions", "completions stream", "models"])
def test_error_unknown_model(client, route):
    calls = {
        "chat": lambda: client.chat.completions.create(model="no-such-model", messages=COUNT, max_tokens=2),
        "chat stream": lambda: client.chat.completions.create(
            model="no-such-model", messages=COUNT, max_tokens=2, stream=True
        ),
        "completions": lambda: client.completions.create(model="no-such-model", prompt="x", max_tokens=2),
        "completions stream": lambda: client.completions.create(
            model="no-such-model", prompt="x", max_tokens=2, stream=True
        ),
        "models": lambda: client.models.retrieve("no-such-model"),
    }
    error = _error(calls[route])
    assert isinstance(error, openai.NotFoundError)
    assert (error.status_code, error.code, error.param, error.type) == (
        404,
        "MODEL_NOT_FOUND",
        "model",
        "invalid_request_error",  # as OpenAI types an unknown model
    )


def test_error_suffix(client, model_id):
    error = _error(lambda: client.completions.create(model=model_id, prompt="def f(", suffix="\n", max_tokens=2))
    assert (error.status_code, error.code, error.param, error.type) == (
        400,
        "UNSUPPORTED_FIELD",
        "suffix",
        "invalid_request_error",
    )


def test_error_from_envoy_itself(client):
    """A path no route serves: Envoy's own reply, in the same shape."""
    error = _error(lambda: client.get("/no/such/path", cast_to=object))
    assert isinstance(error, openai.NotFoundError) and error.type == "invalid_request_error"
