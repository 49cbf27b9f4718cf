"""Anthropic Messages requests (written from the examples in Anthropic's API docs) and, for each, the chat
request vLLM's AnthropicServingMessages converts it to, written out by hand (`render_svc.anthropic_chat` must produce
exactly it, and render must give both the same token ids). Where this deployment converts differently on
purpose (a final assistant turn is continued; `thinking` and `output_config.effort` reach the template), the
case says so in `note`."""

from __future__ import annotations

import json
from dataclasses import dataclass

MODEL = "SmolLM2-135M-Instruct"


@dataclass
class Case:
    name: str
    request: dict
    chat: dict
    note: str = ""


CITY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def req(messages, max_tokens=1024, **more) -> dict:
    return {"model": MODEL, "max_tokens": max_tokens, "messages": messages, **more}


def chat(messages, max_tokens=1024, **more) -> dict:
    return {"model": MODEL, "max_tokens": max_tokens, "messages": messages, **more}


def u(content):
    return {"role": "user", "content": content}


def a(content):
    return {"role": "assistant", "content": content}


def s(content):
    return {"role": "system", "content": content}


def text(t, **more):
    return {"type": "text", "text": t, **more}


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def tool_msg(call_id, content):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


# The get_weather tool of Anthropic's tool-use docs, and its chat form.
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
        "unit": {
            "type": "string",
            "enum": ["celsius", "fahrenheit"],
            "description": "The unit of temperature, either 'celsius' or 'fahrenheit'",
        },
    },
    "required": ["location"],
}
WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather in a given location",
    "input_schema": WEATHER_SCHEMA,
}
WEATHER_CHAT = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": WEATHER_SCHEMA,
        "description": "Get the current weather in a given location",
    },
}
TIME_SCHEMA = {
    "type": "object",
    "properties": {"timezone": {"type": "string", "description": "The IANA time zone name, e.g. America/Los_Angeles"}},
    "required": ["timezone"],
}
TIME = {"name": "get_time", "description": "Get the current time in a given time zone", "input_schema": TIME_SCHEMA}
TIME_CHAT = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": TIME_SCHEMA,
        "description": "Get the current time in a given time zone",
    },
}
TOOL_ID = "toolu_01A09q90qw90lq917835lq9"
SF = {"location": "San Francisco, CA", "unit": "celsius"}
WEATHER_Q = "What is the weather like in San Francisco?"
THINKING = "Let me analyze this step by step. The user wants the weather, so I should call get_weather."
SIGNATURE = "WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL"
GREEK = "What's the Greek name for Sun? (A) Sol (B) Helios (C) Sun"
PRIDE = "<the entire contents of Pride and Prejudice>"

CASES = [
    Case("hello", req([u("Hello, world")]), chat([u("Hello, world")])),
    Case(
        "multi_turn",
        req([u("Hello there."), a("Hi, I'm Claude. How can I help you?"), u("Can you explain LLMs in plain English?")]),
        chat(
            [u("Hello there."), a("Hi, I'm Claude. How can I help you?"), u("Can you explain LLMs in plain English?")]
        ),
    ),
    Case(
        "prefill",
        req([u(GREEK), a("The best answer is (")], max_tokens=1),
        chat(
            [u(GREEK), a("The best answer is (")],
            max_tokens=1,
            add_generation_prompt=False,
            continue_final_message=True,
        ),
        note="vLLM renders a closed assistant turn and a new generation prompt; Anthropic continues the prefill",
    ),
    Case(
        "system_string",
        req([u("Hello")], system="You are a seasoned data scientist at a Fortune 500 company."),
        chat([s("You are a seasoned data scientist at a Fortune 500 company."), u("Hello")]),
    ),
    Case(
        "system_blocks_with_cache_control",
        req(
            [u("Analyze the major themes in 'Pride and Prejudice'.")],
            system=[
                text("You are an AI assistant tasked with analyzing literary works. "),
                text(PRIDE, cache_control={"type": "ephemeral"}),
            ],
        ),
        chat(
            [
                s("You are an AI assistant tasked with analyzing literary works. " + PRIDE),
                u("Analyze the major themes in 'Pride and Prejudice'."),
            ]
        ),
    ),
    Case(
        "billing_header_dropped",
        req(
            [u("List the files.")],
            system=[text("x-anthropic-billing-header: cc_version=2.1; cch=93af"), text("You are Claude Code.")],
        ),
        chat([s("You are Claude Code."), u("List the files.")]),
    ),
    Case(
        "inline_system_merged",
        req([s("Answer in French."), u("Hello")], system="Be brief. "),
        chat([s("Be brief. Answer in French."), u("Hello")]),
    ),
    Case(
        "inline_system_mid_conversation",
        req([u("Hi"), a("Hello!"), {"role": "system", "content": [text("Now be formal.")]}, u("How are you?")]),
        chat([s("Now be formal."), u("Hi"), a("Hello!"), u("How are you?")]),
    ),
    Case("one_text_block", req([u([text("What is in this text?")])]), chat([u("What is in this text?")])),
    Case(
        "several_text_blocks",
        req([u([text("First part."), text("Second part.")])]),
        chat([u([text("First part."), text("Second part.")])]),
    ),
    Case(
        "empty_text_block_skipped",
        req([u([text(""), text("Only this counts.")])]),
        chat([u("Only this counts.")]),
    ),
    Case(
        "tools_auto",
        req([u(WEATHER_Q)], tools=[WEATHER]),
        chat([u(WEATHER_Q)], tools=[WEATHER_CHAT], tool_choice="auto"),
    ),
    Case(
        "tool_use_and_result",
        req(
            [
                u(WEATHER_Q),
                a(
                    [
                        text("<thinking>I need to use get_weather, and the user wants SF.</thinking>"),
                        {"type": "tool_use", "id": TOOL_ID, "name": "get_weather", "input": SF},
                    ]
                ),
                u([{"type": "tool_result", "tool_use_id": TOOL_ID, "content": "15 degrees"}]),
            ],
            tools=[WEATHER],
        ),
        chat(
            [
                u(WEATHER_Q),
                {
                    "role": "assistant",
                    "tool_calls": [call(TOOL_ID, "get_weather", SF)],
                    "content": "<thinking>I need to use get_weather, and the user wants SF.</thinking>",
                },
                tool_msg(TOOL_ID, "15 degrees"),
            ],
            tools=[WEATHER_CHAT],
            tool_choice="auto",
        ),
    ),
    Case(
        "tool_result_blocks_and_error",
        req(
            [
                u(WEATHER_Q),
                a([{"type": "tool_use", "id": TOOL_ID, "name": "get_weather", "input": SF}]),
                u(
                    [
                        {
                            "type": "tool_result",
                            "tool_use_id": TOOL_ID,
                            "content": [
                                text("ConnectionError: the weather service API is not available"),
                                text("(HTTP 500)"),
                            ],
                            "is_error": True,
                        }
                    ]
                ),
            ],
            tools=[WEATHER],
        ),
        chat(
            [
                u(WEATHER_Q),
                {"role": "assistant", "tool_calls": [call(TOOL_ID, "get_weather", SF)]},
                tool_msg(TOOL_ID, "ConnectionError: the weather service API is not available\n(HTTP 500)"),
            ],
            tools=[WEATHER_CHAT],
            tool_choice="auto",
        ),
    ),
    Case(
        "tool_result_then_text",
        req(
            [
                u(WEATHER_Q),
                a([{"type": "tool_use", "id": TOOL_ID, "name": "get_weather", "input": SF}]),
                u([{"type": "tool_result", "tool_use_id": TOOL_ID, "content": "15 degrees"}, text("And tomorrow?")]),
            ],
            tools=[WEATHER],
        ),
        chat(
            [
                u(WEATHER_Q),
                {"role": "assistant", "tool_calls": [call(TOOL_ID, "get_weather", SF)]},
                tool_msg(TOOL_ID, "15 degrees"),
                u("And tomorrow?"),
            ],
            tools=[WEATHER_CHAT],
            tool_choice="auto",
        ),
    ),
    Case(
        "text_before_tool_result",
        req(
            [
                u(WEATHER_Q),
                a([{"type": "tool_use", "id": TOOL_ID, "name": "get_weather", "input": SF}]),
                u([text("Here you go:"), {"type": "tool_result", "tool_use_id": TOOL_ID, "content": "15 degrees"}]),
            ],
            tools=[WEATHER],
        ),
        chat(
            [
                u(WEATHER_Q),
                {"role": "assistant", "tool_calls": [call(TOOL_ID, "get_weather", SF)]},
                tool_msg(TOOL_ID, "15 degrees"),
                u("Here you go:"),
            ],
            tools=[WEATHER_CHAT],
            tool_choice="auto",
        ),
    ),
    Case(
        "parallel_tool_use",
        req(
            [
                u("What's the weather in SF and the time there?"),
                a(
                    [
                        text("I'll check both."),
                        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": SF},
                        {
                            "type": "tool_use",
                            "id": "toolu_02",
                            "name": "get_time",
                            "input": {"timezone": "America/Los_Angeles"},
                        },
                    ]
                ),
                u(
                    [
                        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "15 degrees"},
                        {"type": "tool_result", "tool_use_id": "toolu_02", "content": "3:05 PM"},
                    ]
                ),
            ],
            tools=[WEATHER, TIME],
        ),
        chat(
            [
                u("What's the weather in SF and the time there?"),
                {
                    "role": "assistant",
                    "tool_calls": [
                        call("toolu_01", "get_weather", SF),
                        call("toolu_02", "get_time", {"timezone": "America/Los_Angeles"}),
                    ],
                    "content": "I'll check both.",
                },
                tool_msg("toolu_01", "15 degrees"),
                tool_msg("toolu_02", "3:05 PM"),
            ],
            tools=[WEATHER_CHAT, TIME_CHAT],
            tool_choice="auto",
        ),
    ),
    Case(
        "tool_choice_any",
        req([u(WEATHER_Q)], tools=[WEATHER], tool_choice={"type": "any"}),
        chat([u(WEATHER_Q)], tools=[WEATHER_CHAT], tool_choice="required"),
    ),
    Case(
        "tool_choice_tool",
        req([u(WEATHER_Q)], tools=[WEATHER, TIME], tool_choice={"type": "tool", "name": "get_weather"}),
        chat(
            [u(WEATHER_Q)],
            tools=[WEATHER_CHAT, TIME_CHAT],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        ),
    ),
    Case(
        "tool_choice_none",
        req([u(WEATHER_Q)], tools=[WEATHER], tool_choice={"type": "none"}),
        chat([u(WEATHER_Q)], tools=[WEATHER_CHAT], tool_choice="none"),
    ),
    Case(
        "disable_parallel_tool_use",
        req([u(WEATHER_Q)], tools=[WEATHER], tool_choice={"type": "auto", "disable_parallel_tool_use": True}),
        chat([u(WEATHER_Q)], tools=[WEATHER_CHAT], tool_choice="auto", parallel_tool_calls=False),
        note="vLLM ignores disable_parallel_tool_use",
    ),
    Case(
        "tool_schema_without_type",
        req([u("Ping the server.")], tools=[{"name": "ping", "input_schema": {"properties": {}}}]),
        chat(
            [u("Ping the server.")],
            tools=[
                {"type": "function", "function": {"name": "ping", "parameters": {"properties": {}, "type": "object"}}}
            ],
            tool_choice="auto",
        ),
    ),
    Case(
        "thinking_block",
        req(
            [
                u("Are there an infinite number of primes?"),
                a([{"type": "thinking", "thinking": THINKING, "signature": SIGNATURE}, text("Yes.")]),
                u("Why?"),
            ]
        ),
        chat(
            [
                u("Are there an infinite number of primes?"),
                {"role": "assistant", "reasoning_content": THINKING, "content": "Yes."},
                u("Why?"),
            ]
        ),
    ),
    Case(
        "thinking_and_tool_use",
        req(
            [
                u(WEATHER_Q),
                a(
                    [
                        {"type": "thinking", "thinking": THINKING, "signature": SIGNATURE},
                        {"type": "tool_use", "id": TOOL_ID, "name": "get_weather", "input": SF},
                    ]
                ),
                u([{"type": "tool_result", "tool_use_id": TOOL_ID, "content": "15 degrees"}]),
            ],
            tools=[WEATHER],
        ),
        chat(
            [
                u(WEATHER_Q),
                {"role": "assistant", "reasoning_content": THINKING, "tool_calls": [call(TOOL_ID, "get_weather", SF)]},
                tool_msg(TOOL_ID, "15 degrees"),
            ],
            tools=[WEATHER_CHAT],
            tool_choice="auto",
        ),
    ),
    Case(
        "stop_sequences",
        req([u("Count to ten.")], stop_sequences=["5", "\n\nHuman:"]),
        chat([u("Count to ten.")], stop=["5", "\n\nHuman:"]),
    ),
    Case(
        "sampling",
        req([u("Write a haiku.")], max_tokens=64, temperature=0.5, top_p=0.9, top_k=40),
        chat([u("Write a haiku.")], max_tokens=64, temperature=0.5, top_p=0.9, top_k=40),
    ),
    Case(
        "metadata_user_id",
        req([u("Hello")], metadata={"user_id": "13803d75-b4b5-4c3e-b2a2-6f21399b021b"}),
        chat([u("Hello")]),
    ),
    Case(
        "stream",
        req([u("Hello")], stream=True),
        chat([u("Hello")], stream=True, stream_options={"include_usage": True}),
    ),
    Case(
        "chat_template_kwargs",
        req([u("Hello")], chat_template_kwargs={"enable_thinking": False}),
        chat([u("Hello")], chat_template_kwargs={"enable_thinking": False}),
    ),
    Case(
        "thinking_adaptive",
        req([u("Prove it.")], thinking={"type": "adaptive"}),
        chat([u("Prove it.")], chat_template_kwargs={"enable_thinking": True}),
        note="vLLM drops `thinking`; here it switches the template's thinking",
    ),
    Case(
        "thinking_enabled_with_a_budget",
        req([u("Prove it.")], max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 1024}),
        chat(
            [u("Prove it.")],
            max_tokens=4096,
            chat_template_kwargs={"enable_thinking": True},
            thinking_token_budget=1024,
        ),
        note="vLLM drops `thinking`; here the budget caps the reasoning (the engine forces its end tag)",
    ),
    Case(
        "structured_output",
        req([u("Name a city.")], output_config={"format": {"type": "json_schema", "schema": CITY_SCHEMA}}),
        chat(
            [u("Name a city.")],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": json.dumps(CITY_SCHEMA), "strict": True},
            },
        ),
        note="vLLM drops `output_config.format`; here it is enforced while decoding",
    ),
    Case(
        "thinking_disabled",
        req([u("Just answer.")], thinking={"type": "disabled"}),
        chat([u("Just answer.")], chat_template_kwargs={"enable_thinking": False}),
        note="vLLM drops `thinking`; here it switches the template's thinking",
    ),
    Case(
        "output_config_effort",
        req([u("Think hard.")], output_config={"effort": "high"}),
        chat([u("Think hard.")], chat_template_kwargs={"reasoning_effort": "high"}),
    ),
    Case(
        "claude_code_roles",
        req(
            [{"role": "ctx", "content": "The repo is a Python project."}, {"role": "msg", "content": "Run the tests."}]
        ),
        chat([u("The repo is a Python project."), u("Run the tests.")]),
    ),
    Case(
        "assistant_without_content",
        req([u("Say nothing."), a([]), u("Now say something.")]),
        chat([u("Say nothing."), {"role": "assistant"}, u("Now say something.")]),
    ),
    Case(
        "unicode",
        req([u("Ça va? 你好 🌍 — naïve café ½"), a("Très bien 👍"), u("日本語で答えて")], system="Réponds poliment."),
        chat([s("Réponds poliment."), u("Ça va? 你好 🌍 — naïve café ½"), a("Très bien 👍"), u("日本語で答えて")]),
    ),
    Case(
        "two_tool_rounds",
        req(
            [
                u("Weather in SF, then the time there."),
                a([{"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": SF}]),
                u([{"type": "tool_result", "tool_use_id": "toolu_a", "content": [text("15 degrees")]}]),
                a(
                    [
                        text("It is 15 degrees. Now the time."),
                        {
                            "type": "tool_use",
                            "id": "toolu_b",
                            "name": "get_time",
                            "input": {"timezone": "America/Los_Angeles"},
                        },
                    ]
                ),
                u(
                    [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_b",
                            "content": "3:05 PM",
                            "cache_control": {"type": "ephemeral"},
                        }
                    ]
                ),
            ],
            tools=[WEATHER, {**TIME, "cache_control": {"type": "ephemeral"}}],
        ),
        chat(
            [
                u("Weather in SF, then the time there."),
                {"role": "assistant", "tool_calls": [call("toolu_a", "get_weather", SF)]},
                tool_msg("toolu_a", "15 degrees"),
                {
                    "role": "assistant",
                    "tool_calls": [call("toolu_b", "get_time", {"timezone": "America/Los_Angeles"})],
                    "content": "It is 15 degrees. Now the time.",
                },
                tool_msg("toolu_b", "3:05 PM"),
            ],
            tools=[WEATHER_CHAT, TIME_CHAT],
            tool_choice="auto",
        ),
    ),
    Case(
        "service_tier_auto",
        req([u("Hello")], service_tier="auto"),
        chat([u("Hello")]),
    ),
]

# (name, request, reason, field): refused with 400 naming the field.
REFUSED = [
    (
        "image",
        req(
            [
                u(
                    [
                        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
                        text("What is in this image?"),
                    ]
                )
            ]
        ),
        "INVALID_CONTENT",
        "messages[0].content[0]",
    ),
    (
        "image_url",
        req([u([{"type": "image", "source": {"type": "url", "url": "https://upload.wikimedia.org/a.jpg"}}])]),
        "INVALID_CONTENT",
        "messages[0].content[0]",
    ),
    (
        "document",
        req([u([{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}])]),
        "INVALID_CONTENT",
        "messages[0].content[0]",
    ),
    (
        "image_in_tool_result",
        req(
            [
                u("Take a screenshot."),
                a([{"type": "tool_use", "id": TOOL_ID, "name": "screenshot", "input": {}}]),
                u(
                    [
                        {
                            "type": "tool_result",
                            "tool_use_id": TOOL_ID,
                            "content": [{"type": "image", "source": {"type": "url", "url": "https://a/b.png"}}],
                        }
                    ]
                ),
            ]
        ),
        "INVALID_CONTENT",
        "messages[2].content[0].content[0]",
    ),
    ("missing_max_tokens", {"model": MODEL, "messages": [u("Hi")]}, "INVALID_REQUEST", "max_tokens"),
    ("missing_model", {"max_tokens": 5, "messages": [u("Hi")]}, "INVALID_REQUEST", "model"),
    ("unknown_field", req([u("Hi")], container="container_01"), "UNSUPPORTED_FIELD", "container"),
    (
        "redacted_thinking",
        req([u("Hi"), a([{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p"}]), u("Go on")]),
        "UNSUPPORTED_FIELD",
        "messages[1].content[0]",
    ),
    (
        "server_tool",
        req([u("Search")], tools=[{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]),
        "UNSUPPORTED_FIELD",
        "tools[0].type",
    ),
    (
        "tool_use_from_user",
        req([u([{"type": "tool_use", "id": "t", "name": "x", "input": {}}])]),
        "UNSUPPORTED_FIELD",
        "messages[0].content[0].type",
    ),
    (
        "tool_result_from_assistant",
        req([u("Hi"), a([{"type": "tool_result", "tool_use_id": "t", "content": "x"}])]),
        "UNSUPPORTED_FIELD",
        "messages[1].content[0].type",
    ),
    (
        "thinking_budget_not_below_max_tokens",
        req([u("Hi")], thinking={"type": "enabled", "budget_tokens": 10000}),
        "INVALID_REQUEST",
        "thinking.budget_tokens",
    ),
    (
        "thinking_budget_below_1024",
        req([u("Hi")], max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 512}),
        "INVALID_REQUEST",
        "thinking.budget_tokens",
    ),
    (
        "thinking_enabled_without_budget",
        req([u("Hi")], thinking={"type": "enabled"}),
        "INVALID_REQUEST",
        "thinking.budget_tokens",
    ),
    (
        "thinking_budget_when_adaptive",
        req([u("Hi")], max_tokens=4096, thinking={"type": "adaptive", "budget_tokens": 2048}),
        "INVALID_REQUEST",
        "thinking.budget_tokens",
    ),
    ("thinking_type_unknown", req([u("Hi")], thinking={"type": "sometimes"}), "INVALID_REQUEST", "thinking.type"),
    (
        "output_format_not_json_schema",
        req([u("Hi")], output_config={"format": {"type": "regex", "schema": {"type": "object"}}}),
        "INVALID_REQUEST",
        "output_config.format.type",
    ),
    (
        "output_format_without_schema",
        req([u("Hi")], output_config={"format": {"type": "json_schema"}}),
        "INVALID_REQUEST",
        "output_config.format.schema",
    ),
    (
        "citations",
        req([u([text("Quote it.", citations=[{"type": "char_location"}])])]),
        "UNSUPPORTED_FIELD",
        "messages[0].content[0].citations",
    ),
    (
        "search_result_block",
        req([u([{"type": "search_result", "source": "https://a", "title": "A", "content": [text("x")]}])]),
        "UNSUPPORTED_FIELD",
        "messages[0].content[0].type",
    ),
    ("unknown_role", req([{"role": "tool", "content": "x"}]), "INVALID_ROLE", "messages[0].role"),
    ("metadata_other_key", req([u("Hi")], metadata={"session": "x"}), "UNSUPPORTED_FIELD", "metadata.session"),
    ("max_tokens_not_int", req([u("Hi")], max_tokens="many"), "INVALID_REQUEST", "max_tokens"),
    ("unknown_model", {**req([u("Hi")]), "model": "claude-opus-4-1"}, "MODEL_NOT_FOUND", None),
]
