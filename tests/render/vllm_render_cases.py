"""vLLM-shaped render requests, as llm-d's router and vLLM's own clients send them to `/v1/chat/completions/render`,
`/v1/completions/render`, `/v1/messages/render` and `/v1/responses/render` (the last two: every request of
messages_cases.py and responses_cases.py). vLLM 0.33's answer to each is recorded in `vllm_render_answers.json` by
`python -m tests.render.record_vllm_render`; `test_vllm_render.py` holds ours against it.

`differs` says why this deployment answers a case otherwise on purpose, and `paths` where: with no paths it
refuses the case (400) where vLLM answers it (a field it cannot honour is refused rather than ignored, a limit
vLLM leaves to its engine is checked at render); with paths its answer differs from vLLM's at those JSON paths
only. docs/render.md lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.render import messages_cases, responses_cases

CHAT, COMPLETION = "/v1/chat/completions/render", "/v1/completions/render"
MESSAGES, RESPONSES = "/v1/messages/render", "/v1/responses/render"
MODEL = "SmolLM2-135M-Instruct"  # the served name of both servers (vLLM's is set by the recorder)


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    body: dict
    differs: str = ""
    paths: tuple[str, ...] = ()


def _u(text):
    return {"role": "user", "content": text}


def _a(text, **more):
    return {"role": "assistant", "content": text, **more}


def _s(text):
    return {"role": "system", "content": text}


def _d(text):
    return {"role": "developer", "content": text}


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"],
        },
    },
}
CALC = {
    "type": "function",
    "function": {
        "name": "calculate",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
    },
}
STRICT = {"type": "function", "function": {**CALC["function"], "name": "strict_calc", "strict": True}}
HI = [_u("What is the capital of France?")]
TOOL_TURNS = [
    _u("Weather in Paris?"),
    _a(
        None,
        tool_calls=[
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ],
    ),
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 21}'},
]
SCHEMA = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}, "required": ["b"]}
UNKNOWN = "a field this deployment does not take: refused (400 naming it) where vLLM ignores it"
# What a tool choice constrains is this deployment's own (render_svc/structured.py): required / named -> a JSON
# schema of the call(s), strict tools under auto -> its hermes structural tag, parallel_tool_calls false under
# auto -> nothing (derender keeps the first call), where vLLM's hermes parser builds structural tags of its own.
TOOL_CONSTRAINT = "a tool choice constrains the output with this deployment's constraint, not vLLM's parser's"
TOOL_PATHS = ("sampling_params.structured_outputs",)


def _chat(name, messages=None, differs="", paths=(), **fields) -> Case:
    return Case(f"chat.{name}", CHAT, {"messages": messages if messages is not None else HI, **fields}, differs, paths)


def _cmpl(name, prompt="The capital of France is", differs="", **fields) -> Case:
    body = {"prompt": prompt, **fields} if prompt is not None else dict(fields)
    return Case(f"completion.{name}", COMPLETION, body, differs)


CHAT_CASES = [
    # roles and turns
    _chat("user"),
    _chat("system_user", [_s("You are terse."), _u("Name three colors.")]),
    _chat("developer_user", [_d("Answer in French."), _u("Hello")]),
    _chat("system_developer_user", [_s("Be kind."), _d("Answer in French."), _u("Hello")]),
    _chat("developer_mid", [_u("Hi"), _a("Hello!"), _d("Now be brief."), _u("Why is the sky blue?")]),
    _chat("developer_parts", [{"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}, _u("Hi")]),
    _chat("multi_turn", [_u("Hi!"), _a("Hello! How can I help?"), _u("Tell me a joke.")]),
    _chat("empty_system", [_s(""), _u("Anything?")]),
    _chat("unicode", [_u("Ça va? 你好 🌍 — naïve café ½"), _a("Très bien 👍"), _u("日本語で答えて")]),
    _chat("special_text", [_u("What does <|im_end|> mean? And <think>?")]),
    _chat("parts", [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]),
    _chat("named_user", [{"role": "user", "content": "Hi", "name": "ann"}]),
    _chat("reasoning_history", [_u("2+2?"), _a("4", reasoning="Two plus two."), _u("3+3?")]),
    _chat("reasoning_content_history", [_u("2+2?"), _a("4", reasoning_content="Two plus two."), _u("3+3?")]),
    _chat("tool_turns", TOOL_TURNS, tools=[WEATHER]),
    _chat("tool_turns_no_tools", TOOL_TURNS),
    _chat("assistant_last", [_u("Hi"), _a("Hello")]),
    # generation prompt and continuation
    _chat("no_generation_prompt", add_generation_prompt=False),
    _chat(
        "continue_final",
        [_u("Finish it."), _a("The capital of France is")],
        continue_final_message=True,
        add_generation_prompt=False,
    ),
    _chat("continue_and_generation_prompt", [_u("Hi"), _a("The")], continue_final_message=True),
    _chat(
        "echo",
        [_u("Finish it."), _a("The capital")],
        echo=True,
        continue_final_message=True,
        add_generation_prompt=False,
    ),
    _chat("echo_generation_prompt", echo=True),
    _chat("echo_logprobs", echo=True, logprobs=True, top_logprobs=2),
    # template inputs
    _chat("template_kwargs", chat_template_kwargs={"enable_thinking": False, "flavor": 1}),
    _chat(
        "template_kwargs_reserved",
        chat_template_kwargs={"add_generation_prompt": False},
        differs="a template kwarg that has a field of its own is refused (vLLM overrides it silently)",
    ),
    _chat("reasoning_effort", reasoning_effort="low"),
    _chat("reasoning_effort_none", reasoning_effort="none"),
    _chat("reasoning_effort_and_kwargs", reasoning_effort="high", chat_template_kwargs={"enable_thinking": False}),
    _chat("documents", documents=[{"title": "Paris", "text": "Paris is the capital."}]),
    _chat("add_special_tokens", add_special_tokens=True),
    _chat("request_template", chat_template="{{ messages[0]['content'] }}"),
    # tools
    _chat("tools_auto", tools=[WEATHER, CALC], tool_choice="auto"),
    _chat("tools_default_choice", tools=[WEATHER]),
    _chat("tools_none", tools=[WEATHER], tool_choice="none"),
    _chat(
        "tools_serial",
        differs=TOOL_CONSTRAINT,
        paths=TOOL_PATHS,
        tools=[WEATHER],
        tool_choice="auto",
        parallel_tool_calls=False,
    ),
    _chat("tools_strict", differs=TOOL_CONSTRAINT, paths=TOOL_PATHS, tools=[STRICT], tool_choice="auto"),
    _chat("tools_required", differs=TOOL_CONSTRAINT, paths=TOOL_PATHS, tools=[WEATHER, CALC], tool_choice="required"),
    _chat(
        "tools_named",
        differs=TOOL_CONSTRAINT,
        paths=TOOL_PATHS,
        tools=[WEATHER, CALC],
        tool_choice={"type": "function", "function": {"name": "calculate"}},
    ),
    _chat("tools_named_unknown", tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}}),
    _chat("tool_choice_without_tools", tool_choice="required"),
    # sampling
    _chat("sampling", temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, seed=7),
    _chat("greedy", temperature=0, top_p=0.5, top_k=3),
    _chat("tiny_temperature", temperature=0.001),
    _chat("penalties", presence_penalty=0.5, frequency_penalty=-0.5, repetition_penalty=1.2),
    _chat("seed_minus_one", seed=-1),
    _chat("max_tokens", max_tokens=12),
    _chat("max_completion_tokens", max_completion_tokens=20),
    _chat("max_tokens_both", max_tokens=10, max_completion_tokens=20),
    _chat("max_tokens_over_model", max_tokens=9000),
    _chat("min_tokens_ignore_eos", min_tokens=3, ignore_eos=True, max_tokens=8),
    _chat("n", n=3),
    _chat("stop_string", stop="\n"),
    _chat("stop_list", stop=["a", "bb", "a"]),
    _chat("stop_token_ids", stop_token_ids=[2, 5, 2]),
    _chat("include_stop_str", stop=["x"], include_stop_str_in_output=True),
    _chat("special_token_output", skip_special_tokens=False, spaces_between_special_tokens=False),
    _chat("logprobs", logprobs=True),
    _chat("top_logprobs", logprobs=True, top_logprobs=5),
    _chat("top_logprobs_without_logprobs", top_logprobs=3),
    _chat(
        "top_logprobs_over_limit",
        logprobs=True,
        top_logprobs=25,
        differs="over the server's --max-logprobs (20, vLLM's default): refused at render rather than by the engine",
    ),
    _chat("prompt_logprobs", prompt_logprobs=2),
    _chat("logprob_token_ids", logprobs=True, top_logprobs=3, logprob_token_ids=[100, 5000, 100]),
    _chat("logprob_token_ids without logprobs", logprob_token_ids=[100]),
    _chat("logit_bias", logit_bias={"5": 2.5, "7": -100}),
    _chat("logit_bias_clamped", logit_bias={"5": 250}),
    _chat("allowed_token_ids", allowed_token_ids=[5, 6, 7]),
    _chat("bad_words", bad_words=["Paris", "Paris"]),
    _chat("thinking_token_budget", thinking_token_budget=16),
    _chat("include_reasoning_false", include_reasoning=False),
    _chat("temperature_too_high", temperature=3),
    _chat("top_p_zero", top_p=0),
    _chat("n_zero", n=0),
    _chat("beam_search", use_beam_search=True),
    # structured outputs
    _chat("response_format_text", response_format={"type": "text"}),
    _chat("response_format_json_object", response_format={"type": "json_object"}),
    _chat(
        "response_format_json_schema",
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}},
    ),
    _chat(
        "response_format_json_schema_strict",
        response_format={"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": SCHEMA}},
    ),
    _chat("response_format_missing_schema", response_format={"type": "json_schema"}),
    _chat("structured_json", structured_outputs={"json": SCHEMA}),
    _chat("structured_regex", structured_outputs={"regex": "[a-z]+"}),
    _chat("structured_choice", structured_outputs={"choice": ["yes", "no"]}),
    _chat("structured_grammar", structured_outputs={"grammar": 'root ::= "yes" | "no"'}),
    _chat("structured_json_object", structured_outputs={"json_object": True}),
    _chat("structured_whitespace", structured_outputs={"json": SCHEMA, "disable_any_whitespace": True}),
    _chat("structured_two", structured_outputs={"regex": "a", "choice": ["a"]}),
    _chat("structured_none", structured_outputs={}),
    # request plumbing
    _chat("model", model=MODEL),
    _chat("model_unknown", model="gpt-nope"),
    _chat("request_id", request_id="abc-123"),
    _chat("cache_salt_priority", cache_salt="salt-1", priority=-2),
    _chat("kv_transfer_params", kv_transfer_params={"do_remote_decode": True}),
    # decode-side token reuse: the prefill step's prompt ids, forwarded, in place of the rendered messages
    _chat("kv_transfer_prompt_ids", kv_transfer_params={"prompt_token_ids": [1, 9690, 198, 19556, 2, 28]}),
    _chat("kv_transfer_prompt_ids_and_more", kv_transfer_params={"prompt_token_ids": [1, 2], "do_remote_decode": True}),
    _chat("kv_transfer_prompt_ids_empty", kv_transfer_params={"prompt_token_ids": []}),
    _chat("kv_transfer_prompt_ids_negative", kv_transfer_params={"prompt_token_ids": [1, -2]}),
    _chat("kv_transfer_prompt_ids_out_of_vocab", kv_transfer_params={"prompt_token_ids": [1, 49152]}),
    _chat("stream", stream=True),
    _chat("stream_usage", stream=True, stream_options={"include_usage": True, "continuous_usage_stats": True}),
    _chat("stream_options_without_stream", stream_options={"include_usage": True}),
    _chat("stream_interval", stream_interval=4),
    _chat("return_token_ids", return_token_ids=True),
    _chat("return_token_offsets", return_token_offsets=True),
    _chat("user_field", user="user-1"),
    _chat("truncate", [_u("One two three four five six seven eight nine ten.")], truncate_prompt_tokens=5),
    _chat(
        "truncate_right",
        [_u("One two three four five six seven eight nine ten.")],
        truncate_prompt_tokens=5,
        truncation_side="right",
    ),
    _chat("truncate_all", truncate_prompt_tokens=-1),
    # refused
    _chat("no_messages", []),
    _chat("unknown_role", [{"role": "robot", "content": "beep"}]),  # a custom role: the template renders it
    _chat("custom_role_parts", [{"role": "my-custom-role", "content": [{"type": "text", "text": "what is 1+1?"}]}]),
    _chat(
        "role_not_a_name",
        [{"role": "not a role", "content": "beep"}],
        differs="a role that is no name (up to 64 letters, digits and _.:-) is refused (INVALID_ROLE)",
    ),
    _chat("image", [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]),
    _chat("unknown_field", differs=UNKNOWN, frobnicate=1),
    # found by the broad differential run (vllm_diff.py): what vLLM's request models refuse or read otherwise
    _chat("cache_salt_empty", cache_salt=""),
    _chat("cache_salt_separator", cache_salt="tenant/a"),
    _chat("cache_salt_long", cache_salt="s" * 129),
    _chat("bad_words_empty", bad_words=["a", ""]),
    _chat("thinking_token_budget_unlimited", thinking_token_budget=-1),
    _chat("stream_options_empty_without_stream", stream_options={}),
    _chat("greedy_n", temperature=0, n=2),
    _chat("tools_empty", tools=[]),
    _chat("documents_not_strings", documents=[{"title": "t", "rank": 1}]),
    _chat("refusal_part", [_u("Hi"), {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}]),
    _chat("structured_json_text", structured_outputs={"json": '{"type": "object", "required": ["b"]}'}),
    _chat("numbers_as_strings", top_k="3", seed="7", priority="1", temperature="0.5"),
    _chat("watermarking", watermarking=True, differs=UNKNOWN),
]

COMPLETION_CASES = [
    # every prompt form
    _cmpl("string"),
    _cmpl("strings", ["a", "The sky is"]),
    _cmpl("token_ids", [1, 504, 3575]),
    _cmpl("token_id_lists", [[1, 504], [3575, 314, 4649]]),
    _cmpl("one_string_list", ["Once upon a time"]),
    _cmpl("one_id_list", [[504, 3575]]),
    _cmpl("unicode", "Ça va? 你好 🌍"),
    _cmpl("special_text", "<|im_start|>user\nhi<|im_end|>"),
    _cmpl("empty_string", ""),
    _cmpl("empty_list", []),
    _cmpl("no_prompt", None),
    _cmpl("mixed_list", ["a", 5]),
    _cmpl("negative_id", [1, -5]),
    _cmpl(
        "id_out_of_vocab",
        [1, 10_000_000],
        differs="a token id outside the vocabulary is refused at render (vLLM's engine refuses it later)",
    ),
    # options
    _cmpl("max_tokens", max_tokens=5),
    _cmpl("max_tokens_16", max_tokens=16),
    _cmpl("max_tokens_null", max_tokens=None),
    _cmpl("max_tokens_over_model", max_tokens=9000),
    _cmpl("echo", echo=True),
    _cmpl("echo_logprobs", [[1, 2], [3]], echo=True, logprobs=2),
    _cmpl("echo_max_tokens_zero", echo=True, max_tokens=0),
    _cmpl("max_tokens_zero", max_tokens=0),
    _cmpl("logprobs", logprobs=3),
    _cmpl("prompt_logprobs", prompt_logprobs=1),
    _cmpl("logprob_token_ids", logprobs=2, echo=True, logprob_token_ids=[100, 5000]),
    _cmpl("sampling", temperature=0.5, top_p=0.8, top_k=10, min_p=0.1, seed=1, n=2),
    _cmpl("greedy", temperature=0.0, top_p=0.5, top_k=5, min_p=0.1),
    _cmpl("penalties", presence_penalty=1.0, frequency_penalty=0.2, repetition_penalty=1.1),
    _cmpl("stop", stop=["\n", "."], stop_token_ids=[5, 5, 6], include_stop_str_in_output=True),
    _cmpl("stop_string", stop="!"),
    _cmpl("logit_bias", logit_bias={"5": 200, "7": -1.5}),
    _cmpl("bad_words", bad_words=["a", "a"]),
    _cmpl("min_tokens", min_tokens=2, ignore_eos=True),
    _cmpl("skip_special_tokens", skip_special_tokens=False),
    _cmpl("suffix", suffix="y"),
    _cmpl("stream", stream=True, stream_options={"include_usage": True}),
    _cmpl("stream_options_without_stream", stream_options={"include_usage": True}),
    _cmpl("response_format_json", response_format={"type": "json_object"}),
    _cmpl("structured_regex", structured_outputs={"regex": "[0-9]+"}),
    _cmpl("structured_choice", structured_outputs={"choice": ["Paris", "Lyon"]}),
    _cmpl("truncate", "One two three four five six seven eight", truncate_prompt_tokens=3),
    _cmpl("add_special_tokens_false", add_special_tokens=False),
    _cmpl("return_token_offsets", ["a b", "c"], return_token_offsets=True),
    _cmpl("request_id_many", ["a", "b"], request_id="r-1"),
    _cmpl("request_id_one", request_id="r-2"),
    _cmpl("cache_salt_priority", cache_salt="s", priority=3),
    _cmpl("kv_transfer_params", kv_transfer_params={"do_remote_prefill": True}),
    _cmpl("model", model=MODEL),
    _cmpl("model_unknown", model="nope"),
    _cmpl(
        "thinking_token_budget",
        thinking_token_budget=4,
        differs="a thinking budget is a chat field here (completions have no reasoning gate)",
    ),
    _cmpl("user_field", user="u"),
    _cmpl("n_zero", n=0),
    _cmpl("temperature_negative", temperature=-1),
    _cmpl("unknown_field", frobnicate=True, differs=UNKNOWN),
    _cmpl("greedy_n", temperature=0.0, n=3),
    _cmpl("bad_words_empty", bad_words=[""]),
    _cmpl("numbers_as_strings", top_k="3", seed="7", priority="1", n="2"),
    _cmpl("best_of", best_of=2, differs=UNKNOWN),
]

# Anthropic and Responses requests whose answer differs from vLLM's on purpose, and where
THINKING = (
    "thinking / output_config.effort reach the template as enable_thinking / reasoning_effort (messages_cases.py)"
)
ROLES = "Claude Code's `ctx` / `msg` roles are read as user turns (vLLM 0.33 refuses them)"
PREFILL = "a conversation ending with an assistant turn continues it (Anthropic's prefill)"
# not on purpose: vLLM 0.33 merges inline system messages only where a probe render of the template fails
MERGED = "inline system messages are always merged into the leading one (vLLM: only where the template needs it)"
API_DIFFERS = {
    "messages.tool_choice_any": (TOOL_CONSTRAINT, TOOL_PATHS),
    "messages.tool_choice_tool": (TOOL_CONSTRAINT, TOOL_PATHS),
    "messages.disable_parallel_tool_use": (TOOL_CONSTRAINT, TOOL_PATHS),
    "messages.thinking_adaptive": (THINKING, ("parse_context.chat_template_kwargs",)),
    "messages.thinking_enabled_with_a_budget": (THINKING, ("parse_context.chat_template_kwargs",)),
    "messages.thinking_disabled": (THINKING, ("parse_context.chat_template_kwargs",)),
    "messages.output_config_effort": (THINKING, ("parse_context.chat_template_kwargs",)),
    "messages.claude_code_roles": (ROLES, ("status",)),
    "messages.prefill": (PREFILL, ("token_ids", "parse_context.chat_template_kwargs")),
    "messages.inline_system_merged": (MERGED, ("token_ids",)),
    "messages.inline_system_mid_conversation": (MERGED, ("token_ids",)),
}
# Responses' function tools are strict by default: every request with tools is constrained our way
API_DIFFERS |= {
    f"responses.{c.name}": (TOOL_CONSTRAINT, TOOL_PATHS) for c in responses_cases.CASES if c.request.get("tools")
}


def _api(prefix: str, path: str, module) -> list[Case]:
    return [
        Case(f"{prefix}.{c.name}", path, c.request, *API_DIFFERS.get(f"{prefix}.{c.name}", ())) for c in module.CASES
    ]


API_CASES = _api("messages", MESSAGES, messages_cases) + _api("responses", RESPONSES, responses_cases)
CASES = CHAT_CASES + COMPLETION_CASES + API_CASES
