"""OpenAI Responses requests (written from the examples in OpenAI's Responses API docs) and, for each, the chat
request vLLM's construct_input_messages converts it to, written out by hand (`render_svc.responses_chat` must produce
exactly it, and render must give both the same token ids)."""

from __future__ import annotations

from tests.render.messages_cases import MODEL, Case, a, s, text, u

WEATHER_PARAMS = {
    "type": "object",
    "properties": {"location": {"type": "string", "description": "City and country e.g. Bogotá, Colombia"}},
    "required": ["location"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get current temperature for a given location.",
    "parameters": WEATHER_PARAMS,
    "strict": True,
}
WEATHER_CHAT = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get current temperature for a given location.",
        "parameters": WEATHER_PARAMS,
        "strict": True,
    },
}
HOROSCOPE_PARAMS = {
    "type": "object",
    "properties": {"sign": {"type": "string", "description": "An astrological sign like Taurus or Aquarius"}},
    "required": ["sign"],
}
HOROSCOPE = {
    "type": "function",
    "name": "get_horoscope",
    "description": "Get today's horoscope for an astrological sign.",
    "parameters": HOROSCOPE_PARAMS,
}
HOROSCOPE_CHAT = {
    "type": "function",
    "function": {
        "name": "get_horoscope",
        "description": "Get today's horoscope for an astrological sign.",
        "parameters": HOROSCOPE_PARAMS,
    },
}
PARIS_Q = "What is the weather like in Paris today?"
PARIS_ARGS = '{"location":"Paris, France"}'
STORY = "Tell me a three sentence bedtime story about a unicorn."
REASONING = "The user asks for the weather in Paris; I should call get_weather."


def req(input_, **more) -> dict:
    return {"model": MODEL, "input": input_, **more}


def chat(messages, **more) -> dict:
    return {"model": MODEL, "messages": messages, **more}


def fc(call_id, name, arguments, **more):
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments, **more}


def fco(call_id, output):
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_msg(call_id, content):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def out_msg(t, **more):
    return {
        "id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": t, "annotations": []}],
        **more,
    }


def reasoning_item(t, **more):
    return {
        "type": "reasoning",
        "id": "rs_6890e972",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": t}],
        **more,
    }


def input_text(t):
    return {"type": "input_text", "text": t}


CASES = [
    Case("string_input", req(STORY), chat([u(STORY)])),
    Case(
        "include_logprobs",
        req(STORY, include=["message.output_text.logprobs"], top_logprobs=3),
        chat([u(STORY)], logprobs=True, top_logprobs=3),
    ),
    Case(
        "instructions",
        req("Are semicolons optional in JavaScript?", instructions="Talk like a pirate."),
        chat([s("Talk like a pirate."), u("Are semicolons optional in JavaScript?")]),
    ),
    Case(
        "developer_message",
        req([{"role": "developer", "content": "Talk like a pirate."}, u("Are semicolons optional in JavaScript?")]),
        chat([{"role": "developer", "content": "Talk like a pirate."}, u("Are semicolons optional in JavaScript?")]),
    ),
    Case(
        "input_text_parts",
        req([u([input_text("what is in this text?")])]),
        chat([u([text("what is in this text?")])]),
    ),
    Case(
        "explicit_message_type",
        req([{"type": "message", "role": "user", "content": "Hello!"}]),
        chat([u("Hello!")]),
    ),
    Case(
        "previous_output_echoed",
        req([u("knock knock."), out_msg("Who's there?"), u("Orange.")]),
        chat([u("knock knock."), a("Who's there?"), u("Orange.")]),
    ),
    Case(
        "assistant_string",
        req([u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")]),
        chat([u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")]),
    ),
    Case("function_tool", req(PARIS_Q, tools=[WEATHER]), chat([u(PARIS_Q)], tools=[WEATHER_CHAT])),
    Case(
        "function_call_round_trip",
        req(
            [
                u(PARIS_Q),
                fc("call_12345xyz", "get_weather", PARIS_ARGS, id="fc_12345xyz", status="completed"),
                fco("call_12345xyz", '{"temperature": 14}'),
            ],
            tools=[WEATHER],
        ),
        chat(
            [
                u(PARIS_Q),
                {"role": "assistant", "tool_calls": [call("call_12345xyz", "get_weather", PARIS_ARGS)]},
                tool_msg("call_12345xyz", '{"temperature": 14}'),
            ],
            tools=[WEATHER_CHAT],
        ),
    ),
    Case(
        "parallel_function_calls",
        req(
            [
                u("Weather in Paris and my horoscope (Aquarius)?"),
                fc("call_1", "get_weather", PARIS_ARGS),
                fc("call_2", "get_horoscope", '{"sign":"Aquarius"}'),
                fco("call_1", "14C"),
                fco("call_2", "Next Tuesday you will befriend a baby otter."),
            ],
            tools=[WEATHER, HOROSCOPE],
        ),
        chat(
            [
                u("Weather in Paris and my horoscope (Aquarius)?"),
                {
                    "role": "assistant",
                    "tool_calls": [
                        call("call_1", "get_weather", PARIS_ARGS),
                        call("call_2", "get_horoscope", '{"sign":"Aquarius"}'),
                    ],
                },
                tool_msg("call_1", "14C"),
                tool_msg("call_2", "Next Tuesday you will befriend a baby otter."),
            ],
            tools=[WEATHER_CHAT, HOROSCOPE_CHAT],
        ),
    ),
    Case(
        "reasoning_then_call",
        req(
            [u(PARIS_Q), reasoning_item(REASONING), fc("call_1", "get_weather", PARIS_ARGS), fco("call_1", "14C")],
            tools=[WEATHER],
        ),
        chat(
            [
                u(PARIS_Q),
                {
                    "role": "assistant",
                    "reasoning_content": REASONING,
                    "tool_calls": [call("call_1", "get_weather", PARIS_ARGS)],
                },
                tool_msg("call_1", "14C"),
            ],
            tools=[WEATHER_CHAT],
        ),
    ),
    Case(
        "reasoning_summary_only",
        req(
            [
                u("2+2?"),
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Simple sum."}]},
                out_msg("4"),
                u("And 3+3?"),
            ]
        ),
        chat([u("2+2?"), {"role": "assistant", "reasoning_content": "Simple sum.", "content": "4"}, u("And 3+3?")]),
    ),
    Case(
        "reasoning_then_message",
        req([u("Is 7 prime?"), reasoning_item("7 has no divisors but 1 and 7."), out_msg("Yes."), u("And 9?")]),
        chat(
            [
                u("Is 7 prime?"),
                {"role": "assistant", "reasoning_content": "7 has no divisors but 1 and 7.", "content": "Yes."},
                u("And 9?"),
            ]
        ),
    ),
    Case(
        "message_then_call",
        req(
            [u(PARIS_Q), out_msg("Let me check."), fc("call_1", "get_weather", PARIS_ARGS), fco("call_1", "14C")],
            tools=[WEATHER],
        ),
        chat(
            [
                u(PARIS_Q),
                {
                    "role": "assistant",
                    "content": "Let me check.",
                    "tool_calls": [call("call_1", "get_weather", PARIS_ARGS)],
                },
                tool_msg("call_1", "14C"),
            ],
            tools=[WEATHER_CHAT],
        ),
    ),
    Case(
        "call_then_message_merges",
        req([u(PARIS_Q), fc("call_1", "get_weather", PARIS_ARGS), out_msg("Checking the weather.")], tools=[WEATHER]),
        chat(
            [
                u(PARIS_Q),
                {
                    "role": "assistant",
                    "tool_calls": [call("call_1", "get_weather", PARIS_ARGS)],
                    "content": "Checking the weather.",
                },
            ],
            tools=[WEATHER_CHAT],
        ),
    ),
    Case(
        "tool_choice_required",
        req(PARIS_Q, tools=[WEATHER], tool_choice="required"),
        chat([u(PARIS_Q)], tools=[WEATHER_CHAT], tool_choice="required"),
    ),
    Case(
        "tool_choice_named",
        req(PARIS_Q, tools=[WEATHER, HOROSCOPE], tool_choice={"type": "function", "name": "get_weather"}),
        chat(
            [u(PARIS_Q)],
            tools=[WEATHER_CHAT, HOROSCOPE_CHAT],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        ),
    ),
    Case(
        "tool_choice_none",
        req(PARIS_Q, tools=[WEATHER], tool_choice="none"),
        chat([u(PARIS_Q)], tools=[WEATHER_CHAT], tool_choice="none"),
    ),
    Case(
        "tool_choice_auto",
        req(PARIS_Q, tools=[WEATHER], tool_choice="auto"),
        chat([u(PARIS_Q)], tools=[WEATHER_CHAT], tool_choice="auto"),
    ),
    Case(  # the SDK's default sent as is; vLLM's Responses (and OpenAI) take it as "none" (SGLang's test sends it)
        "tool_choice_auto_without_tools",
        req(PARIS_Q, tool_choice="auto"),
        chat([u(PARIS_Q)]),
    ),
    Case(
        "parallel_tool_calls_off",
        req(PARIS_Q, tools=[WEATHER], parallel_tool_calls=False),
        chat([u(PARIS_Q)], tools=[WEATHER_CHAT], parallel_tool_calls=False),
    ),
    Case("max_output_tokens", req(STORY, max_output_tokens=50), chat([u(STORY)], max_tokens=50)),
    Case("sampling", req(STORY, temperature=0.7, top_p=0.95), chat([u(STORY)], temperature=0.7, top_p=0.95)),
    Case("text_format_text", req(STORY, text={"format": {"type": "text"}}), chat([u(STORY)])),
    Case(
        "text_format_json_object",
        req(STORY, text={"format": {"type": "json_object"}}),
        chat([u(STORY)], response_format={"type": "json_object"}),
    ),
    Case(
        "text_format_json_schema",
        req(STORY, text={"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}, "strict": True}}),
        chat(
            [u(STORY)],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": '{"type": "object"}', "strict": True},
            },
        ),
    ),
    Case(
        "reasoning_effort",
        req("How much gold would it take to coat the Statue of Liberty?", reasoning={"effort": "low"}),
        chat(
            [u("How much gold would it take to coat the Statue of Liberty?")],
            chat_template_kwargs={"reasoning_effort": "low", "enable_thinking": True},
        ),
    ),
    Case(
        "reasoning_effort_none",
        req(STORY, reasoning={"effort": "none"}),
        chat([u(STORY)], chat_template_kwargs={"reasoning_effort": "none", "enable_thinking": False}),
    ),
    Case(
        "chat_template_kwargs",
        req(STORY, chat_template_kwargs={"enable_thinking": False}),
        chat([u(STORY)], chat_template_kwargs={"enable_thinking": False}),
    ),
    Case(
        "chat_template_kwargs_enable_thinking_over_effort",
        req(STORY, reasoning={"effort": "none"}, chat_template_kwargs={"enable_thinking": True}),
        chat([u(STORY)], chat_template_kwargs={"enable_thinking": True, "reasoning_effort": "none"}),
    ),
    Case("truncation_auto", req(STORY, truncation="auto"), chat([u(STORY)], truncate_prompt_tokens=-1)),
    Case("truncation_disabled", req(STORY, truncation="disabled"), chat([u(STORY)])),
    Case("store_false", req(STORY, store=False), chat([u(STORY)])),
    Case("metadata", req(STORY, metadata={"session": "abc", "team": "red"}), chat([u(STORY)])),
    Case(
        "identity_fields",
        req(STORY, user="user-1234", safety_identifier="sid-9", prompt_cache_key="story-cache"),
        chat([u(STORY)], prompt_cache_key="story-cache"),
    ),
    Case("stream", req(STORY, stream=True), chat([u(STORY)], stream=True, stream_options={"include_usage": True})),
    Case(
        "continue_incomplete_message",
        req([u("Write a limerick about a cat."), out_msg("There once was a cat", status="incomplete")]),
        chat(
            [u("Write a limerick about a cat."), a("There once was a cat")],
            add_generation_prompt=False,
            continue_final_message=True,
        ),
    ),
    Case(
        "system_message_item",
        req([{"role": "system", "content": "You are terse."}, u("Name three colors.")]),
        chat([s("You are terse."), u("Name three colors.")]),
    ),
    Case(
        "instructions_and_developer",
        req([{"role": "developer", "content": [input_text("Answer in French.")]}, u("Hello")], instructions="Be kind."),
        chat([s("Be kind."), {"role": "developer", "content": [text("Answer in French.")]}, u("Hello")]),
    ),
    Case(
        "function_output_parts",
        req(
            [
                u(PARIS_Q),
                fc("call_1", "get_weather", PARIS_ARGS),
                fco("call_1", [input_text("14C"), input_text("sunny")]),
            ],
            tools=[WEATHER],
        ),
        chat(
            [
                u(PARIS_Q),
                {"role": "assistant", "tool_calls": [call("call_1", "get_weather", PARIS_ARGS)]},
                tool_msg("call_1", "14C\nsunny"),
            ],
            tools=[WEATHER_CHAT],
        ),
    ),
    Case(
        "vllm_extensions",
        req(STORY, top_k=20, seed=7, stop="THE END", repetition_penalty=1.1, min_p=0.05),
        chat([u(STORY)], top_k=20, seed=7, stop=["THE END"], repetition_penalty=1.1, min_p=0.05),
    ),
    Case(  # vLLM's ResponsesRequest takes them (SGLang's test_openai_server sends frequency_penalty)
        "penalties",
        req(STORY, presence_penalty=0.5, frequency_penalty=1.0),
        chat([u(STORY)], presence_penalty=0.5, frequency_penalty=1.0),
    ),
    Case("service_tier_and_include", req(STORY, service_tier="auto", include=[]), chat([u(STORY)])),
    Case("no_model", {"input": STORY}, {"messages": [u(STORY)]}),
    Case(  # both shape the Response (a summary, the echo), not the prompt
        "summary_and_cache_retention",
        req(STORY, reasoning={"summary": "auto"}, prompt_cache_retention="in_memory"),
        chat([u(STORY)]),
    ),
    Case(
        "unicode",
        req(
            [u("Ça va? 你好 🌍 — naïve café ½"), out_msg("Très bien 👍"), u("日本語で答えて")],
            instructions="Réponds poliment.",
        ),
        chat([s("Réponds poliment."), u("Ça va? 你好 🌍 — naïve café ½"), a("Très bien 👍"), u("日本語で答えて")]),
    ),
]

REFUSED = [
    (
        "previous_response_id",
        req("And then?", previous_response_id="resp_123"),
        "UNSUPPORTED_FIELD",
        "previous_response_id",
    ),
    ("store_true", req(STORY, store=True), "UNSUPPORTED_FIELD", "store"),
    ("background", req(STORY, background=True), "UNSUPPORTED_FIELD", "background"),
    ("conversation", req(STORY, conversation="conv_123"), "UNSUPPORTED_FIELD", "conversation"),
    (
        "input_image",
        req(
            [
                u(
                    [
                        input_text("what is in this image?"),
                        {"type": "input_image", "image_url": "https://upload.wikimedia.org/a.jpg"},
                    ]
                )
            ]
        ),
        "INVALID_CONTENT",
        "input[0].content[1]",
    ),
    (
        "input_file",
        req([u([{"type": "input_file", "file_id": "file-6F2ksmvXxt4VdoqmHRw6kL"}])]),
        "INVALID_CONTENT",
        "input[0].content[0]",
    ),
    ("item_reference", req([{"type": "item_reference", "id": "msg_123"}]), "UNSUPPORTED_FIELD", "input[0]"),
    (
        "encrypted_reasoning",
        req([u("Hi"), {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"}]),
        "UNSUPPORTED_FIELD",
        "input[1].encrypted_content",
    ),
    ("hosted_tool", req(STORY, tools=[{"type": "web_search_preview"}]), "UNSUPPORTED_FIELD", "tools[0].type"),
    (
        "unknown_format",
        req(STORY, text={"format": {"type": "xml"}}),
        "INVALID_REQUEST",
        "text.format.type",
    ),
    (
        "reasoning_summary_concise",
        req(STORY, reasoning={"effort": "low", "summary": "concise"}),
        "UNSUPPORTED_FIELD",
        "reasoning.summary",
    ),
    ("reasoning_summary_unknown", req(STORY, reasoning={"summary": "brief"}), "INVALID_REQUEST", "reasoning.summary"),
    (
        "prompt_cache_retention_24h",
        req(STORY, prompt_cache_retention="24h"),
        "UNSUPPORTED_FIELD",
        "prompt_cache_retention",
    ),
    (
        "prompt_cache_retention_unknown",
        req(STORY, prompt_cache_retention="1h"),
        "INVALID_REQUEST",
        "prompt_cache_retention",
    ),
    ("unknown_field", req(STORY, frobnicate=True), "UNSUPPORTED_FIELD", "frobnicate"),
    ("hosted_tool_choice", req(STORY, tool_choice={"type": "web_search_preview"}), "UNSUPPORTED_FIELD", "tool_choice"),
    ("prompt_template", req(STORY, prompt={"id": "pmpt_123"}), "UNSUPPORTED_FIELD", "prompt"),
    (
        "include_encrypted_reasoning",
        req(STORY, include=["message.output_text.logprobs", "reasoning.encrypted_content"]),
        "UNSUPPORTED_FIELD",
        "include[1]",
    ),
    ("top_logprobs_out_of_range", req(STORY, top_logprobs=21), "INVALID_SAMPLING_PARAM", "top_logprobs"),
    (
        "obfuscation",
        req(STORY, stream=True, stream_options={"include_obfuscation": True}),
        "UNSUPPORTED_FIELD",
        "stream_options.include_obfuscation",
    ),
    (
        "web_search_call_item",
        req([{"type": "web_search_call", "id": "ws_1", "status": "completed"}]),
        "UNSUPPORTED_FIELD",
        "input[0].type",
    ),
    ("missing_input", {"model": MODEL}, "INVALID_REQUEST", "input"),
    (
        "max_output_tokens_too_large",
        req(STORY, max_output_tokens=10_000_000),
        "MAX_TOKENS_TOO_LARGE",
        "max_output_tokens",
    ),
]
