"""The generated cases of `vllm_diff.py`: every field of vLLM 0.33's ChatCompletionRequest and CompletionRequest at
valid, edge and invalid values (`VALUES`, each on both routes), crossed with message shapes, generation-prompt
switches, tools and tool choices, template inputs and completion prompt forms. `VALID` holds values both servers
take, from which 600 requests of several fields are drawn."""

from __future__ import annotations

import itertools
import json
import random

from render_svc.vllm_render.fields import FIELDS, NO_OP, REFUSED
from tests.render.vllm_render_cases import CALC, CHAT, COMPLETION, SCHEMA, STRICT, TOOL_PATHS, TOOL_TURNS, WEATHER, Case

HI = [{"role": "user", "content": "What is the capital of France?"}]
BIG = 2**63
# Per field, the values each route gets (vLLM's types: pydantic, lax, so "5" and 1.0 may pass as an int there).
VALUES: dict[str, list] = {
    "temperature": [0, 0.5, 1, 2, 2.5, 1e-9, -0.1, "0.5", True, [1]],
    "top_p": [0, 0.01, 1, 1.5, -1, "x"],
    "top_k": [-1, 0, 1, 50, -2, 1.5, 2.0, "3"],
    "min_p": [0, 0.5, 1, 1.1, -0.1],
    "seed": [0, 42, -1, -2, BIG - 1, BIG, -BIG, 1.5, 3.0, "7"],
    "stop": ["", "x", [], ["a"], ["a", "b", "c", "d", "e"], [""], 5, [1], {"a": 1}],
    "stop_token_ids": [[], [0], [2, 2], [-1], ["a"], 5, [10**7]],
    "max_tokens": [0, 1, 8192, 8193, -1, 1.0, 1.5, "5", 2**31, BIG],
    "max_completion_tokens": [0, 1, 8193, -1, 2.0, "5"],
    "n": [1, 2, 0, -1, 2.0, 128, 129, 2**31, True],
    "logprobs": [True, False, 0, 1, 5, 20, 21, -1, 2.0, "x"],
    "top_logprobs": [0, 1, 20, 21, -1, 1.5],
    "prompt_logprobs": [0, 1, 20, 21, -1, -2, True],
    "logit_bias": [{}, {"5": 1}, {"5": 101}, {"5": -101.5}, {"x": 1}, {"99999999": 1}, {"-1": 1}, {"5": "a"}, []],
    "allowed_token_ids": [[], [1], [1, 1], [-1], [10**7], "x"],
    "bad_words": [[], ["a"], [""], [" Paris"], "a", [1]],
    "presence_penalty": [-2, 0, 2, -2.1, 2.1],
    "frequency_penalty": [-2, 0, 2, -2.1, 2.1],
    "repetition_penalty": [0, 1e-9, 0.5, 1, 2, 2.5, -1],
    "min_tokens": [0, 5, -1, 1.0, 8193],
    "ignore_eos": [True, False, 1, "yes"],
    "skip_special_tokens": [True, False, 0],
    "spaces_between_special_tokens": [True, False, "no"],
    "include_stop_str_in_output": [True, False, "x"],
    "truncate_prompt_tokens": [-1, 0, 1, 5, 100000, -2, 1.5, BIG],
    "truncation_side": ["left", "right", "middle"],
    "echo": [True, False, "x"],
    "add_special_tokens": [True, False, 1],
    "add_generation_prompt": [True, False, "x"],
    "continue_final_message": [True, False],
    "priority": [0, -100, 100, 2**31, BIG, 1.5, "1"],
    "request_id": ["", "x", "a" * 300, 5],
    "cache_salt": ["", "s", 5],
    "kv_transfer_params": [{}, {"a": 1}, [], "x"],
    "vllm_xargs": [{}, {"a": 1}, {"a": [1, "b"]}, {"a": {"b": 1}}, []],
    "stream": [True, False, "x"],
    "stream_interval": [0, 1, 5, -1],
    "user": ["u", "", 5],
    "session_id": ["s", 5],
    "return_token_ids": [True, False, "x"],
    "return_token_offsets": [True, False],
    "thinking_token_budget": [0, 10, -1, "x"],
    "include_reasoning": [True, False],
    "documents": [[], [{"title": "t", "text": "x"}], [{"text": "only text"}], [{"a": 1, "b": [1]}], "x", [5]],
    "chat_template_kwargs": [{}, {"enable_thinking": True}, {"x": [1, {"y": None}]}, {"tools": []}, [], "x"],
    "reasoning_effort": ["low", "medium", "high", "none", "minimal", "max", 5],
    "parallel_tool_calls": [True, False, "x"],
    "suffix": ["", "y"],
    "model": ["SmolLM2-135M-Instruct", "", "nope", 5],
    "response_format": [
        {"type": "text"},
        {"type": "json_object"},
        {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}},
        {"type": "json_schema", "json_schema": {"name": "x"}},
        {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}},
        {"type": "structural_tag", "format": {"type": "const_string", "value": "x"}},
        {"type": "grammar"},
        {"type": "xml"},
        {},
        "json_object",
    ],
    "structured_outputs": [
        {},
        {"json": SCHEMA},
        {"json": json.dumps(SCHEMA)},
        {"regex": "[a-z]+"},
        {"regex": "("},
        {"choice": []},
        {"choice": ["a"]},
        {"grammar": 'root ::= "a"'},
        {"json_object": False},
        {"structural_tag": json.dumps({"type": "structural_tag", "format": {"type": "const_string", "value": "x"}})},
        {"json": SCHEMA, "whitespace_pattern": " "},
        {"json": SCHEMA, "disable_fallback": True},
        {"json": SCHEMA, "disable_additional_properties": True},
        {"regex": "a", "json": SCHEMA},
        {"nope": 1},
        "x",
    ],
    "frobnicate": [1],
    "best_of": [1, 2],
}
# vLLM's fields this table leaves out: the no-op ones (their own value and one more) and the refused ones.
for _name, _field in FIELDS.items():
    if _field.how in (NO_OP, REFUSED) and _name not in VALUES:
        VALUES[_name] = [*_field.values, 7]


def _u(text):
    return {"role": "user", "content": text}


def _a(text, **more):
    return {"role": "assistant", "content": text, **more}


def _call(call_id, city):
    arguments = json.dumps({"city": city})
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}


PARTS = [{"type": "text", "text": "Hello"}, {"type": "text", "text": "world"}]
MESSAGES: dict[str, list] = {
    "user": HI,
    "system": [{"role": "system", "content": "Be brief."}, _u("Hi")],
    "system_parts": [{"role": "system", "content": PARTS}, _u("Hi")],
    "user_parts": [{"role": "user", "content": PARTS}],
    "user_one_part": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
    "user_empty_parts": [{"role": "user", "content": []}],
    "user_empty": [_u("")],
    "assistant_parts": [_u("Hi"), {"role": "assistant", "content": PARTS}],
    "assistant_last": [_u("Hi"), _a("The answer is")],
    "assistant_none": [_u("Hi"), _a(None)],
    "assistant_only": [_a("Hello")],
    "system_only": [{"role": "system", "content": "x"}],
    "tool_turns": TOOL_TURNS,
    "tool_parts": [*TOOL_TURNS[:2], {"role": "tool", "tool_call_id": "call_1", "content": PARTS}],
    "tool_no_id": [*TOOL_TURNS[:2], {"role": "tool", "content": "21"}],
    "tool_dict_args": [
        _u("Weather?"),
        _a(None, tool_calls=[{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]),
    ],
    "tool_calls_empty": [_u("Hi"), _a("ok", tool_calls=[])],
    "two_system": [{"role": "system", "content": "a"}, {"role": "system", "content": "b"}, _u("Hi")],
    "user_twice": [_u("a"), _u("b")],
    "name": [{"role": "user", "content": "Hi", "name": "ann"}],
    "extra_key": [{"role": "user", "content": "Hi", "foo": 1}],
    "refusal_part": [_u("Hi"), {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}],
    "input_text_part": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
    "part_no_type": [{"role": "user", "content": [{"text": "Hi"}]}],
    "part_unknown": [{"role": "user", "content": [{"type": "nope", "text": "Hi"}]}],
    "function_role": [_u("Hi"), {"role": "function", "name": "f", "content": "1"}],
    "developer": [{"role": "developer", "content": "Be brief."}, _u("Hi")],
    "parallel_calls": [
        _u("Weather in Paris and Rome?"),
        _a(None, tool_calls=[_call("c1", "Paris"), _call("c2", "Rome")]),
        {"role": "tool", "tool_call_id": "c1", "content": "21"},
        {"role": "tool", "tool_call_id": "c2", "content": "25"},
    ],
    "call_no_id": [_u("Weather?"), _a(None, tool_calls=[{"type": "function", **_call("x", "Oslo")["function"]}])],
    "call_bad_args": [
        _u("Weather?"),
        _a("", tool_calls=[{**_call("c", ""), "function": {"name": "f", "arguments": "{"}}]),
    ],
    "call_no_type": [
        _u("Weather?"),
        _a(None, tool_calls=[{k: v for k, v in _call("c", "Oslo").items() if k != "type"}]),
    ],
    "reasoning_parts": [_u("2+2?"), {"role": "assistant", "content": PARTS, "reasoning": "Add."}, _u("And 3+3?")],
    "tool_named": [*TOOL_TURNS[:2], {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "1"}],
    "empty": [],
    "no_role": [{"content": "Hi"}],
    "no_content": [{"role": "user"}],
    "int_content": [{"role": "user", "content": 5}],
    "null_message": [None],
    "not_a_list": {"role": "user", "content": "Hi"},
    "string": "Hi",
}
TOOLS = {"none": None, "one": [WEATHER], "two": [WEATHER, CALC], "strict": [STRICT], "empty": []}
CHOICES = {
    "unset": None,
    "auto": "auto",
    "none": "none",
    "required": "required",
    "named": {"type": "function", "function": {"name": "calculate"}},
    "named_unknown": {"type": "function", "function": {"name": "nope"}},
    "bad": "sometimes",
}
PROMPTS = {
    "string": "The capital of France is",
    "empty": "",
    "strings": ["a", "b c"],
    "one_string": ["Once"],
    "ids": [1, 504, 3575],
    "one_id": [5],
    "id_lists": [[1, 2], [3]],
    "empty_ids": [[]],
    "empty_list": [],
    "mixed": ["a", [1]],
    "negative": [-1],
    "float_ids": [1.0, 2.0],
    "bool_ids": [True],
    "nested": [[[1]]],
    "int": 5,
    "dict": {"a": 1},
}


def generate() -> list[Case]:
    cases = []
    for field, values in VALUES.items():
        for i, value in enumerate(values):
            for path, route, base in ((CHAT, "chat", {"messages": HI}), (COMPLETION, "completion", {"prompt": "Hi"})):
                cases.append(Case(f"{route}.{field}[{i}]", path, {**base, field: value}))
    for name, messages in MESSAGES.items():
        for generation, cont in itertools.product((True, False), (False, True)):
            body = {"messages": messages, "add_generation_prompt": generation, "continue_final_message": cont}
            cases.append(Case(f"chat.msg.{name}.gen{int(generation)}.cont{int(cont)}", CHAT, body))
    for (tools, tool_list), (choice, value), parallel in itertools.product(
        TOOLS.items(), CHOICES.items(), (None, True, False)
    ):
        body: dict = {"messages": TOOL_TURNS if tools == "one" and choice == "auto" else HI}
        body |= {
            k: v
            for k, v in (("tools", tool_list), ("tool_choice", value), ("parallel_tool_calls", parallel))
            if v is not None
        }
        ours = choice in ("required", "named") or tools == "strict" or parallel is False
        cases.append(Case(f"chat.tools.{tools}.{choice}.p{parallel}", CHAT, body, paths=TOOL_PATHS if ours else ()))
    for name, prompt in PROMPTS.items():
        for echo, logprobs in itertools.product((False, True), (None, 2)):
            body = {"prompt": prompt, "echo": echo} | ({} if logprobs is None else {"logprobs": logprobs})
            cases.append(Case(f"completion.prompt.{name}.echo{int(echo)}.lp{logprobs}", COMPLETION, body))
    combos = [
        {"echo": True, "max_tokens": 0},
        {"echo": True, "max_tokens": 0, "n": 2},
        {"min_tokens": 10, "max_tokens": 5},
        {"temperature": 0, "n": 3},
        {"temperature": 0, "seed": 5},
        {"logprobs": True, "top_logprobs": 0},
        {"top_logprobs": 2, "logprobs": False},
        {"stop": ["x"], "include_stop_str_in_output": True, "skip_special_tokens": False},
        {"truncate_prompt_tokens": 3, "truncation_side": "right", "echo": True},
        {"max_tokens": 5, "max_completion_tokens": 7},
        {"stream": True, "stream_options": {"include_usage": True}},
        {"stream": True, "stream_options": {"nope": 1}},
        {"stream": False, "stream_options": {}},
        {"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}},
        {"ignore_eos": True, "max_tokens": 3},
    ]
    for i, combo in enumerate(combos):
        cases.append(Case(f"chat.combo[{i}]", CHAT, {"messages": HI, **combo}))
        cases.append(Case(f"completion.combo[{i}]", COMPLETION, {"prompt": "Hi", **combo}))
    cases += _mixed(300)
    return cases


# Values both servers take, for the mixed requests (chat's logprobs is a switch, completion's a count).
VALID: dict[str, list] = {
    "temperature": [0, 0.5, 1.3],
    "top_p": [0.01, 0.9],
    "top_k": [-1, 1, 50],
    "min_p": [0, 0.2],
    "seed": [0, 42, -1],
    "stop": ["x", ["a", "bb"], []],
    "stop_token_ids": [[2, 2], [0]],
    "max_tokens": [1, 50],
    "max_completion_tokens": [7],
    "min_tokens": [0, 1],
    "logprobs": [2, 0],
    "top_logprobs": [0, 3],
    "prompt_logprobs": [0, 2],
    "logit_bias": [{"5": 1}, {"5": 101}],
    "allowed_token_ids": [[1, 1], [5, 6]],
    "bad_words": [["a"], [" Paris"]],
    "presence_penalty": [-2, 1.5],
    "frequency_penalty": [0.5],
    "repetition_penalty": [0.5, 1.2],
    "ignore_eos": [True, False],
    "skip_special_tokens": [True, False],
    "spaces_between_special_tokens": [False],
    "include_stop_str_in_output": [True],
    "truncate_prompt_tokens": [-1, 5, 100000],
    "truncation_side": ["left", "right"],
    "echo": [True, False],
    "add_special_tokens": [True, False],
    "add_generation_prompt": [True, False],
    "continue_final_message": [True, False],
    "priority": [-3, 4],
    "request_id": ["r-1"],
    "cache_salt": ["salt"],
    "kv_transfer_params": [{"a": 1}],
    "stream_interval": [1, 4],
    "return_token_ids": [True],
    "return_token_offsets": [True],
    "thinking_token_budget": [0, 10],
    "include_reasoning": [False],
    "documents": [[{"title": "t", "text": "x"}]],
    "chat_template_kwargs": [{"enable_thinking": True}, {"x": [1]}],
    "reasoning_effort": ["low", "none"],
    "tools": [[WEATHER], [WEATHER, CALC]],
    "tool_choice": ["auto", "none"],
    "parallel_tool_calls": [True],
    "response_format": [
        {"type": "json_object"},
        {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}},
    ],
    "structured_outputs": [{"regex": "[a-z]+"}, {"choice": ["a", "b"]}],
}


MIXED_SHAPES = ("user", "system", "system_parts", "user_parts", "assistant_parts", "assistant_last", "tool_turns")
MIXED_SHAPES += ("two_system", "user_twice", "name", "refusal_part")


def _mixed(count: int, seed: int = 35) -> list[Case]:
    """`count` requests a route, each of 2 to 6 fields at values both servers take (`VALID`), drawn with a fixed
    seed: the fields together, as clients send them."""
    draw = random.Random(seed)
    out = []
    for route, path, base in (("chat", CHAT, "messages"), ("completion", COMPLETION, "prompt")):
        taken = [f for f in VALID if FIELDS[f].route in ("both", route)]
        shapes = [MESSAGES[m] for m in MIXED_SHAPES] if route == "chat" else list(PROMPTS.values())[:7]
        for i in range(count):
            body = {base: draw.choice(shapes)}
            body |= {name: draw.choice(VALID[name]) for name in draw.sample(taken, draw.randint(2, 6))}
            if route == "chat" and isinstance(body.get("logprobs"), int):
                body["logprobs"] = bool(body["logprobs"])
            out.append(Case(f"{route}.mixed[{i}]", path, body))
    return out
