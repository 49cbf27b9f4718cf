"""Strict tools under tool_choice auto (the default) hold a call's arguments to the tool's schema: the default
model, taught to call get_weather with a city *name*, must give the integer the strict schema asks for; a plain
question still answers in text; the SDK's `parse` with `pydantic_function_tool` (strict, no tool_choice) works."""

from __future__ import annotations

import json

import jsonschema
import openai
import pydantic
import pytest

from tests.clients.prompts import TOOL_SYSTEM, WEATHER

pytestmark = pytest.mark.slow

CITY_ID = {
    "type": "object",
    "properties": {"city": {"type": "integer"}},
    "required": ["city"],
    "additionalProperties": False,
}
STRICT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": CITY_ID,
            "strict": True,
        },
    }
]


class GetWeather(pydantic.BaseModel):
    """Get the current weather in a city."""

    city: int


def test_a_strict_call_under_auto_matches_its_schema(client, model_id):
    answer = client.chat.completions.create(
        model=model_id, messages=WEATHER, tools=STRICT_TOOLS, max_tokens=40, temperature=0
    )
    (choice,) = answer.choices
    assert choice.finish_reason == "tool_calls", choice.message.content
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), CITY_ID)


def test_a_plain_question_with_strict_tools_answers_in_text(client, model_id):
    messages = [{"role": "system", "content": TOOL_SYSTEM}, {"role": "user", "content": "What is 2+2?"}]
    answer = client.chat.completions.create(
        model=model_id, messages=messages, tools=STRICT_TOOLS, tool_choice="auto", max_tokens=20, temperature=0
    )
    (choice,) = answer.choices
    assert choice.message.content and not choice.message.tool_calls and choice.finish_reason in ("stop", "length")


def test_parse_with_a_pydantic_function_tool(client, model_id):
    tool = openai.pydantic_function_tool(GetWeather, name="get_weather")
    assert tool["function"].get("strict") is True
    answer = client.chat.completions.parse(model=model_id, messages=WEATHER, tools=[tool], max_tokens=40, temperature=0)
    (call,) = answer.choices[0].message.tool_calls
    assert isinstance(call.function.parsed_arguments, GetWeather)
    assert isinstance(call.function.parsed_arguments.city, int)
