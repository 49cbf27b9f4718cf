"""SGLang's output fields (render_svc/sglang_fields.py) onto the DerenderContext, over real gRPC: the mapping table,
its precedence, and `return_hidden_states: true` refused naming it. Chat and completions."""

from __future__ import annotations

import pytest
from google.protobuf import json_format

from scaleout.v1 import derender_pb2, render_pb2
from tests.render.calls import chat, expect

WHOLE, OMITTED = derender_pb2.REASONING_DELIVERY_WHOLE, derender_pb2.REASONING_DELIVERY_OMITTED
UNSPECIFIED = derender_pb2.REASONING_DELIVERY_UNSPECIFIED

# fields -> (reasoning_parser, reasoning_delivery, include_stop_str_in_output)
CASES = [
    ({}, ("", UNSPECIFIED, False)),
    (  # what vllm-router adds to every chat body: the defaults, spelled out
        {
            "separate_reasoning": True,
            "stream_reasoning": True,
            "include_reasoning": True,
            "no_stop_trim": False,
            "return_hidden_states": False,
        },
        ("", UNSPECIFIED, False),
    ),
    ({"separate_reasoning": False}, ("none", UNSPECIFIED, False)),
    ({"stream_reasoning": False}, ("", WHOLE, False)),
    ({"include_reasoning": False}, ("", OMITTED, False)),
    ({"include_reasoning": False, "stream_reasoning": False}, ("", OMITTED, False)),
    ({"separate_reasoning": False, "include_reasoning": False}, ("none", UNSPECIFIED, False)),
    ({"no_stop_trim": True}, ("", UNSPECIFIED, True)),
    ({"no_stop_trim": False, "include_stop_str_in_output": True}, ("", UNSPECIFIED, True)),
]


@pytest.mark.parametrize(("fields", "expected"), CASES)
async def test_chat_fields_onto_the_context(stub, fields, expected):
    context = (await stub.RenderChat(chat(**fields))).derender_context
    assert (context.reasoning_parser, context.reasoning_delivery, context.include_stop_str_in_output) == expected


async def test_completion_takes_no_stop_trim(stub):
    request = json_format.ParseDict(
        {"prompts": ["Hi"], "no_stop_trim": True, "return_hidden_states": False}, render_pb2.RenderCompletionRequest()
    )
    [prompt] = (await stub.RenderCompletion(request)).prompts
    assert prompt.derender_context.include_stop_str_in_output


async def test_hidden_states_are_refused(stub):
    error = await expect(stub.RenderChat(chat(return_hidden_states=True)), "INVALID_ARGUMENT", "UNSUPPORTED_FIELD")
    assert error.violations[0][0] == "return_hidden_states"
    completion = json_format.ParseDict(
        {"prompts": ["Hi"], "return_hidden_states": True}, render_pb2.RenderCompletionRequest()
    )
    error = await expect(stub.RenderCompletion(completion), "INVALID_ARGUMENT", "UNSUPPORTED_FIELD")
    assert error.violations[0][0] == "return_hidden_states"
