"""Render compiles response_format, structured_outputs and forced tool choices into the GenerateRequest's
constraint (with the reasoning it starts after) and tokenizes bad_words; conflicting or malformed ones are
refused with the contract's reasons."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio
from google.protobuf import json_format

from render_svc.structured import Reasoning
from scaleout.v1 import render_pb2
from scaleout_common.models import load_tokenizer, resolve_model
from tests.derender.response_templates import QWEN3
from tests.render.calls import chat, expect
from tests.render.conftest import render_server
from tests.render.fixtures import CALC, TEMPLATES, WEATHER

SCHEMA = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}, "required": ["a"]}


def constraint_of(response: render_pb2.RenderChatResponse):
    return response.generate_request.sampling_params.structured_outputs


async def test_response_format_json_schema_and_json_object(stub):
    fmt = {"type": "json_schema", "json_schema": {"name": "thing", "schema": SCHEMA, "strict": True}}
    so = constraint_of(await stub.RenderChat(chat(response_format=fmt)))
    assert json.loads(so.json_schema) == SCHEMA and so.reasoning_ended and not so.HasField("reasoning")
    as_text = {"type": "json_schema", "json_schema": {"name": "thing", "schema": json.dumps(SCHEMA)}}
    assert constraint_of(await stub.RenderChat(chat(response_format=as_text))).json_schema == json.dumps(SCHEMA)
    assert constraint_of(await stub.RenderChat(chat(response_format={"type": "json_object"}))).json_object
    plain = await stub.RenderChat(chat(response_format={"type": "text"}))
    assert not plain.generate_request.sampling_params.HasField("structured_outputs")


@pytest.mark.parametrize(
    "given,kind,value",
    [
        ({"json": SCHEMA}, "json_schema", SCHEMA),
        ({"regex": "[a-z]+"}, "regex", "[a-z]+"),
        ({"choice": ["yes", "no"]}, "choice", ["yes", "no"]),
        ({"grammar": 'root ::= "a"'}, "grammar", 'root ::= "a"'),
        ({"json_object": True}, "json_object", True),
    ],
)
async def test_vllm_structured_outputs(stub, given, kind, value):
    so = constraint_of(await stub.RenderChat(chat(structured_outputs={**given, "disable_any_whitespace": True})))
    assert so.WhichOneof("constraint") == kind and so.disable_any_whitespace
    got = getattr(so, kind)
    if kind == "json_schema":
        got = json.loads(got)
    elif kind == "choice":
        got = list(got.values)
    assert got == value


async def test_json_is_compact_unless_structured_outputs_allows_whitespace(stub):
    """No free whitespace by default (response_format, forced tools, vLLM's json); `disable_any_whitespace: false`
    in structured_outputs allows it, alone or as the option of the request's other constraint."""
    fmt = {"type": "json_schema", "json_schema": {"name": "thing", "schema": SCHEMA}}
    assert constraint_of(await stub.RenderChat(chat(response_format=fmt))).disable_any_whitespace
    assert constraint_of(await stub.RenderChat(chat(tools=[WEATHER], tool_choice="required"))).disable_any_whitespace
    assert constraint_of(await stub.RenderChat(chat(structured_outputs={"json": SCHEMA}))).disable_any_whitespace
    loose = {"disable_any_whitespace": False}
    so = constraint_of(await stub.RenderChat(chat(response_format=fmt, structured_outputs=loose)))
    assert so.json_schema and not so.disable_any_whitespace
    so = constraint_of(await stub.RenderChat(chat(tools=[WEATHER], tool_choice="required", structured_outputs=loose)))
    assert so.json_schema and not so.disable_any_whitespace
    assert not constraint_of(
        await stub.RenderChat(chat(structured_outputs={"json": SCHEMA, **loose}))
    ).disable_any_whitespace


async def test_forced_tool_choices_become_schemas_over_the_calls(stub):
    tools = [WEATHER, CALC]
    required = constraint_of(await stub.RenderChat(chat(tools=tools, tool_choice="required")))
    schema = json.loads(required.json_schema)
    assert schema["type"] == "array" and schema["minItems"] == 1 and "maxItems" not in schema
    names = [o["properties"]["name"]["enum"] for o in schema["items"]["anyOf"]]
    assert names == [["get_weather"], ["calculate"]]
    assert schema["items"]["anyOf"][0]["properties"]["parameters"] == WEATHER["function"]["parameters"]
    # the calls are a list the engine's item budget ends rather than open a call max_tokens cannot hold
    assert (required.items.end, required.items.separators) == ("]", ",")
    single = constraint_of(await stub.RenderChat(chat(tools=tools, tool_choice="required", parallel_tool_calls=False)))
    assert json.loads(single.json_schema)["maxItems"] == 1 and not single.HasField("items")
    loose = {"disable_any_whitespace": False}
    spaced = constraint_of(await stub.RenderChat(chat(tools=tools, tool_choice="required", structured_outputs=loose)))
    assert spaced.items.separators == ", \t\n\r"
    named = await stub.RenderChat(
        chat(tools=tools, tool_choice={"type": "function", "function": {"name": "calculate"}})
    )
    assert json.loads(constraint_of(named).json_schema) == CALC["function"]["parameters"]
    auto = await stub.RenderChat(chat(tools=tools, tool_choice="auto"))
    assert not auto.generate_request.sampling_params.HasField("structured_outputs")


async def test_a_forced_tool_choice_takes_the_output_beside_a_response_format(stub):
    """OpenAI's reading (and vLLM's): the forced output is calls only, so the answer format has no text to shape;
    instructor's RESPONSES_TOOLS mode sends both."""
    fmt = {"type": "json_schema", "json_schema": {"name": "thing", "schema": SCHEMA, "strict": True}}
    named = {"type": "function", "function": {"name": "calculate"}}
    so = constraint_of(await stub.RenderChat(chat(tools=[WEATHER, CALC], tool_choice=named, response_format=fmt)))
    assert json.loads(so.json_schema) == CALC["function"]["parameters"]
    required = chat(tools=[WEATHER], tool_choice="required", response_format={"type": "json_object"})
    assert json.loads(constraint_of(await stub.RenderChat(required)).json_schema)["type"] == "array"


async def test_completion_takes_structured_outputs_and_bad_words(stub):
    request = json_format.ParseDict(
        {"prompts": ["a", "b"], "structured_outputs": {"regex": "[0-9]+"}, "bad_words": ["hello"], "max_tokens": 5},
        render_pb2.RenderCompletionRequest(),
    )
    response = await stub.RenderCompletion(request)
    for item in response.prompts:
        params = item.generate_request.sampling_params
        assert params.structured_outputs.regex == "[0-9]+" and params.structured_outputs.reasoning_ended
        assert [list(w.token_ids) for w in params.bad_words]


async def test_bad_words_become_token_sequences_alone_and_after_a_space(stub):
    tokenizer = load_tokenizer(resolve_model(None))
    response = await stub.RenderChat(chat(bad_words=["world", " Paris"]))
    words = [list(w.token_ids) for w in response.generate_request.sampling_params.bad_words]
    assert tokenizer.encode("world", add_special_tokens=False) in words
    assert tokenizer.encode(" world", add_special_tokens=False) in words
    assert tokenizer.encode("Paris", add_special_tokens=False) in words


@pytest.mark.parametrize(
    "fields,code,reason",
    [
        (
            {"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}},
            "INVALID_ARGUMENT",
            "CONFLICTING_OPTIONS",
        ),
        ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "INVALID_ARGUMENT", "CONFLICTING_OPTIONS"),
        ({"structured_outputs": {"disable_any_whitespace": True}}, "INVALID_ARGUMENT", "INVALID_GRAMMAR"),
        ({"structured_outputs": {"json": "{not json"}}, "INVALID_ARGUMENT", "INVALID_GRAMMAR"),
        ({"structured_outputs": {"regex": "a", "whitespace_pattern": " "}}, "INVALID_ARGUMENT", "UNSUPPORTED_FIELD"),
        ({"response_format": {"type": "xml"}}, "INVALID_ARGUMENT", "INVALID_REQUEST"),
        ({"response_format": {"type": "json_object", "schema": {}}}, "INVALID_ARGUMENT", "UNSUPPORTED_FIELD"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "min": 1}}},
            "INVALID_ARGUMENT",
            "UNSUPPORTED_FIELD",
        ),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
            "INVALID_ARGUMENT",
            "INVALID_REQUEST",
        ),
        (
            {"tools": [WEATHER], "tool_choice": "required", "response_format": {"type": "json_schema"}},
            "INVALID_ARGUMENT",
            "INVALID_REQUEST",
        ),
    ],
)
async def test_refusals(stub, fields, code, reason):
    await expect(stub.RenderChat(chat(**fields)), code, reason)


async def test_json_schema_takes_openais_keys(stub):
    spec = {"name": "x", "description": "an object", "strict": False, "schema": SCHEMA}
    so = constraint_of(await stub.RenderChat(chat(response_format={"type": "json_schema", "json_schema": spec})))
    assert json.loads(so.json_schema) == SCHEMA


@pytest_asyncio.fixture(scope="module")
async def thinking_stub():
    async with render_server("--chat-template", str(TEMPLATES / "qwen3.jinja"), "--reasoning-parser", "qwen3") as s:
        yield s


async def test_reasoning_gate_from_the_template(thinking_stub):
    tokenizer = load_tokenizer(resolve_model(None))
    fmt = {"type": "json_object"}
    thinking = constraint_of(await thinking_stub.RenderChat(chat(response_format=fmt)))
    assert not thinking.reasoning_ended
    encoded = [tokenizer.encode(tag, add_special_tokens=False) for tag in ("</think>", " </think>")]
    assert [list(s.token_ids) for s in thinking.reasoning.end] == encoded  # " </" is one token of its own
    assert list(thinking.reasoning.ends_on[0].token_ids) == tokenizer.encode("<tool_call>", add_special_tokens=False)
    assert not thinking.reasoning.started
    off = await thinking_stub.RenderChat(chat(response_format=fmt, chat_template_kwargs={"enable_thinking": False}))
    assert constraint_of(off).reasoning_ended  # the template closed the block in the prompt


def test_hf_gates_after_the_reasoning_its_response_template_declares():
    """`hf` / `beam` take their reasoning tags from the model's response_template (Qwen3's here), so a grammar
    starts after the thinking region as it does for the named parsers; without a template nothing is gated."""
    tokenizer = load_tokenizer(resolve_model(None))
    tokenizer.response_template = QWEN3
    reasoning = Reasoning(tokenizer, "hf")
    ids = [tuple(tokenizer.encode(tag, add_special_tokens=False)) for tag in ("<think>", "</think>")]
    assert reasoning.name == "hf" and ids[0] in reasoning.spec().start and ids[1] in reasoning.spec().end
    assert reasoning.started("<|im_start|>assistant\n<think>\n") is True
    assert reasoning.started("<|im_start|>assistant\n<think>\n</think>") is None  # the prompt closed it
    tokenizer.response_template = None
    assert Reasoning(tokenizer, "beam").name == "none"


async def test_a_thinking_budget_carries_the_reasoning_tags(thinking_stub, stub):
    tokenizer = load_tokenizer(resolve_model(None))
    rendered = await thinking_stub.RenderChat(chat(thinking_token_budget=50))
    budget = rendered.generate_request.sampling_params.thinking_budget
    assert budget.max_tokens == 50 and not budget.reasoning.started
    assert list(budget.reasoning.end[0].token_ids) == tokenizer.encode("</think>", add_special_tokens=False)
    off = await thinking_stub.RenderChat(
        chat(thinking_token_budget=50, chat_template_kwargs={"enable_thinking": False})
    )
    plain = await stub.RenderChat(chat(thinking_token_budget=50))  # SmolLM2's template: no reasoning to cap
    for unreasoned in (off, plain):
        assert not unreasoned.generate_request.sampling_params.HasField("thinking_budget")
    error = await expect(stub.RenderChat(chat(thinking_token_budget=-1)), "INVALID_ARGUMENT", "INVALID_SAMPLING_PARAM")
    assert error.violations[0][0] == "thinking_token_budget"


STRICT_WEATHER = {"type": "function", "function": {**WEATHER["function"], "strict": True}}


async def test_strict_tools_under_auto_carry_a_triggered_structural_tag(stub):
    for fields in ({}, {"tool_choice": "auto"}):
        so = constraint_of(await stub.RenderChat(chat(tools=[STRICT_WEATHER, CALC], **fields)))
        tag = json.loads(so.structural_tag)
        form = tag["format"]
        assert tag["type"] == "structural_tag" and form["type"] == "triggered_tags" and so.reasoning_ended
        assert form["triggers"] == ["<tool_call>"] and not form["stop_after_first"]
        by_begin = {t["begin"]: t for t in form["tags"]}
        strict = by_begin['<tool_call>{"name": "get_weather", "arguments": ']
        assert strict["content"]["json_schema"] == WEATHER["function"]["parameters"]
        assert strict["end"] == ["}</tool_call>", "}\n</tool_call>"]
        loose = by_begin['<tool_call>\n{"name": "calculate", "arguments": ']
        assert loose["content"]["json_schema"] == {"type": "object"}  # not strict: any JSON object
        assert (so.items.end, so.items.separators) == ("", "<")  # calls among free text: each opens with "<"
    single = constraint_of(await stub.RenderChat(chat(tools=[STRICT_WEATHER], parallel_tool_calls=False)))
    assert json.loads(single.structural_tag)["format"]["stop_after_first"] and not single.HasField("items")
    without = await stub.RenderChat(chat(tools=[WEATHER, CALC]))  # no strict tool: unconstrained
    assert not without.generate_request.sampling_params.HasField("structured_outputs")


async def test_strict_tools_under_auto_with_a_response_format_answer_or_call(stub):
    fmt = {"type": "json_schema", "json_schema": {"name": "thing", "schema": SCHEMA}}
    so = constraint_of(await stub.RenderChat(chat(tools=[STRICT_WEATHER], response_format=fmt)))
    answer, calls = json.loads(so.structural_tag)["format"]["elements"]
    assert answer == {"type": "json_schema", "json_schema": SCHEMA}
    assert calls["type"] == "tags_with_separator" and calls["at_least_one"]
    assert (so.items.end, so.items.separators) == ("", calls["separator"])
    fields = {"tools": [STRICT_WEATHER], "structured_outputs": {"regex": "a"}}
    error = await expect(stub.RenderChat(chat(**fields)), "INVALID_ARGUMENT", "CONFLICTING_OPTIONS")
    assert error.violations[0][0] == "tools[0].function.strict"


async def test_strict_tools_under_auto_in_another_format_are_refused_naming_strict():
    async with render_server("--tool-parser", "mistral") as other:
        call = other.RenderChat(chat(tools=[CALC, STRICT_WEATHER]))
        error = await expect(call, "INVALID_ARGUMENT", "UNSUPPORTED_FIELD")
        assert error.violations[0][0] == "tools[1].function.strict" and "hermes" in error.message
        assert await other.RenderChat(chat(tools=[STRICT_WEATHER], tool_choice="required"))
