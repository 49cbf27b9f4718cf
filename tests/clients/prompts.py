"""Requests the client tests share: prompts whose greedy answers on the default model show what is tested."""

from __future__ import annotations

import json

COUNT = [{"role": "user", "content": "Count from 1 to 20, separated by commas."}]

# SmolLM2's chat template does not render `tools`, so a system message and one worked turn teach it the hermes
# format the stack's default tool parser reads; greedy, it then calls the tool (twice when asked for two cities).
TOOL_SYSTEM = (
    "You call functions. To call get_weather, answer with exactly: "
    '<tool_call>{"name": "get_weather", "arguments": {"city": CITY}}</tool_call>'
)
WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def tool_call_text(city: str) -> str:
    return "<tool_call>" + json.dumps({"name": "get_weather", "arguments": {"city": city}}) + "</tool_call>"


WEATHER = [
    {"role": "system", "content": TOOL_SYSTEM},
    {"role": "user", "content": "What is the weather in London?"},
    {"role": "assistant", "content": tool_call_text("London")},
    {"role": "user", "content": "What is the weather in Paris?"},
]
WEATHER_TWO_CITIES = [
    {"role": "system", "content": TOOL_SYSTEM},
    {"role": "user", "content": "What is the weather in Madrid and Oslo?"},
    {"role": "assistant", "content": tool_call_text("Madrid") + "\n" + tool_call_text("Oslo")},
    {"role": "user", "content": "Weather in Paris and in Berlin?"},
]
