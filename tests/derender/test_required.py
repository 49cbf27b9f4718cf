"""tool_choice "required": render constrains the output to a JSON array of {"name", "parameters"} objects;
derender turns it into tool calls on every path (unary, stateful stream, stateless twin), falls back to the
model's own format for an output that is not such an array, and reads a call a length cut left open as
OpenAI returns one (its name, its arguments so far)."""

from __future__ import annotations

import json

import pytest

from derender_svc.parsers import make_tool_parser
from scaleout.v1 import common_pb2, derender_pb2
from tests.derender.calls import engine_messages, stream, twin
from tests.derender.test_service import chunks_of, tool_calls

TOOLS = [
    common_pb2.Tool(type="function", function=common_pb2.FunctionDefinition(name=name))
    for name in ("get_weather", "get_time")
]
ARRAY = (
    '[{"name": "get_weather", "parameters": {"city": "Zürich", "days": [1, 2]}}, '
    '{"name": "get_time", "parameters": {"zone": "a\\"b}"}}]'
)


def context(**fields) -> derender_pb2.DerenderContext:
    return derender_pb2.DerenderContext(
        id="chatcmpl-req", tools=TOOLS, tool_choice=derender_pb2.TOOL_CHOICE_MODE_REQUIRED, **fields
    )


@pytest.mark.parametrize("parallel", [True, False])
async def test_an_array_of_calls_is_tool_calls_on_every_path(stub, hf_tokenizer, parallel):
    ctx = context(parallel_tool_calls=parallel)
    messages = engine_messages(
        chunks_of(hf_tokenizer.encode(ARRAY, add_special_tokens=False), 2) + [[2]], stop_token_id=2
    )
    unary = (await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=ctx, results=messages))).choices[0]
    got = [(c.function.name, json.loads(c.function.arguments)) for c in unary.message.tool_calls]
    expected = [("get_weather", {"city": "Zürich", "days": [1, 2]}), ("get_time", {"zone": 'a"b}'})]
    assert got == (expected if parallel else expected[:1])
    assert unary.finish_reason == "tool_calls" and not unary.message.HasField("content")
    for responses in (await stream(stub, ctx, messages), await twin(stub, ctx, messages)):
        assert [(c["name"], c["arguments"]) for c in tool_calls(responses)] == [
            (c.function.name, c.function.arguments) for c in unary.message.tool_calls
        ]


async def test_an_array_cut_short_is_a_cut_call_once_its_name_is_whole(stub, hf_tokenizer):
    """As OpenAI returns a call a length cut ends: its name and its arguments so far; before a whole name, the
    text is content (nothing names a call yet)."""
    for text, call in (
        ('[{"name": "get_weather", "parameters": {"ci', ("get_weather", '{"ci')),
        ('[\n{"name": "get_time"', ("get_time", "")),
        ('[{"name": "get_wea', None),
    ):
        messages = engine_messages(chunks_of(hf_tokenizer.encode(text, add_special_tokens=False)), finish=2)
        request = derender_pb2.DerenderChatRequest(context=context(), results=messages)
        unary = (await stub.DerenderChat(request)).choices[0]
        assert unary.finish_reason == "length"
        if call is None:
            assert unary.message.content == text and not unary.message.tool_calls
            continue
        assert [(c.function.name, c.function.arguments) for c in unary.message.tool_calls] == [call]
        assert not unary.message.HasField("content")
        for responses in (await stream(stub, context(), messages), await twin(stub, context(), messages)):
            assert [(c["name"], c["arguments"]) for c in tool_calls(responses)] == [call]


def test_calls_complete_as_each_object_closes():
    parser = make_tool_parser("required", fallback="hermes")
    first = '[{"name": "get_weather", "parameters": {"city": "Oslo"}}'
    content, deltas = parser.feed(first[:-1], False)
    assert (content, deltas) == ("", [])
    content, deltas = parser.feed(first[-1] + ", ", False)
    assert [(d.index, d.name, d.arguments) for d in deltas] == [(0, "get_weather", ""), (0, None, '{"city": "Oslo"}')]
    rebuilt = make_tool_parser("required", parser.state())  # the stateless twin's way
    content, deltas = rebuilt.feed('{"name": "get_time", "parameters": {}}]', True)
    assert [(d.index, d.name) for d in deltas] == [(1, "get_time"), (1, None)] and content == ""


def test_an_output_in_the_models_own_format_goes_to_its_parser():
    parser = make_tool_parser("required", fallback="hermes")
    content, deltas = parser.feed('<tool_call>{"name": "get_time", "arguments": {}}</tool_call>', True)
    assert content == "" and [d.name for d in deltas if d.name] == ["get_time"]
    plain = make_tool_parser("required", fallback="none")
    assert plain.feed("no calls here", True) == ("no calls here", [])
