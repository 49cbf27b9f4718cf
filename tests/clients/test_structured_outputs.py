"""Structured outputs through the real stack with the official `openai` SDK, on the default model: JSON schemas
(55 shapes, each greedy or sampled), JSON mode, vLLM's regex and choice, forced tool choices, `.parse()` with a
pydantic model (unary and streamed), reasoning gating with a think-style template, and unconstrained streams
that decode exactly as they do without constrained neighbours."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import openai
import pytest
from pydantic import BaseModel

from devstack.stack import Stack, StackConfig
from tests.clients.structured_schemas import SCHEMAS

THINK_TEMPLATE = Path(__file__).resolve().parent.parent / "render" / "templates" / "qwen3.jinja"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 40},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current local time in a time zone",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "pattern": "^[A-Z][a-z]{1,12}/[A-Z][a-z_]{1,14}$"}},
            "required": ["zone"],
            "additionalProperties": False,
        },
    },
}
SCHEMA_OF = {tool["function"]["name"]: tool["function"]["parameters"] for tool in (WEATHER, TIME)}


def ask(what: str) -> list[dict]:
    return [
        {"role": "system", "content": "You answer with JSON only."},
        {"role": "user", "content": f"Give me {what} as JSON."},
    ]


def run_all(calls, workers: int = 8) -> list:
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda call: call(), calls))


@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "sampled"])
def test_json_schemas_are_followed_whenever_the_output_stops(client, model_id, sampled):
    def call(index: int, name: str, schema: dict):
        return lambda: client.chat.completions.create(
            model=model_id,
            messages=ask(name),
            response_format={
                "type": "json_schema",
                "json_schema": {"name": f"s{index}", "schema": schema, "strict": True},
            },
            max_tokens=200,
            temperature=0.8 if sampled else 0,
            seed=index if sampled else None,
        )

    # Every schema runs once: a third of them (every third) sampled at temperature 0.8, the rest greedy. The
    # grammars themselves are proven over far more schemas without a model (tests/structured).
    schemas = [s for i, s in enumerate(SCHEMAS) if (i % 3 == 0) == sampled]
    results = run_all([call(i, name, schema) for i, (name, schema) in enumerate(schemas)])
    stopped = 0
    for (name, schema), result in zip(schemas, results):
        choice = result.choices[0]
        assert choice.finish_reason in ("stop", "length"), (name, choice.finish_reason)
        if choice.finish_reason == "stop":
            stopped += 1
            value = json.loads(choice.message.content)
            jsonschema.validate(value, schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    assert stopped >= 0.8 * len(schemas), f"only {stopped} of {len(schemas)} outputs finished"


def test_json_mode_returns_a_json_object(client, model_id):
    result = client.chat.completions.create(
        model=model_id,
        messages=ask("a short profile of a cat"),
        response_format={"type": "json_object"},
        max_tokens=120,
    )
    choice = result.choices[0]
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content), dict)
    else:
        assert choice.message.content.lstrip().startswith("{")


def test_regex_and_choice_outputs_match(client, model_id):
    regexes = [r"[A-Z][a-z]{2,8}", r"\d{3}-\d{4}", r"(yes|no|maybe)\.", r"[a-f0-9]{8}"]
    choices = [["Paris", "London", "Rome"], ["positive", "negative"], ["A", "B", "C", "D"]]
    calls = [
        lambda r=r: client.chat.completions.create(
            model=model_id,
            messages=[{"role": "user", "content": "Say something."}],
            extra_body={"structured_outputs": {"regex": r}},
            max_tokens=30,
            temperature=0.7,
            seed=3,
        )
        for r in regexes
    ] + [
        lambda c=c: client.chat.completions.create(
            model=model_id,
            messages=[{"role": "user", "content": f"Pick one of {', '.join(c)}."}],
            extra_body={"structured_outputs": {"choice": c}},
            max_tokens=10,
        )
        for c in choices
    ]
    results = run_all(calls)
    for regex, result in zip(regexes, results[: len(regexes)]):
        assert result.choices[0].finish_reason == "stop"
        assert re.fullmatch(regex, result.choices[0].message.content), (regex, result.choices[0].message.content)
    for options, result in zip(choices, results[len(regexes) :]):
        assert result.choices[0].message.content in options


def check_call(call) -> None:
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, SCHEMA_OF[call.function.name])
    assert call.id.startswith("call_") and call.type == "function"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("parallel", [True, False])
def test_tool_choice_required_always_calls(client, model_id, stream, parallel):
    questions = ["What is the weather in Oslo?", "What time is it in Tokyo?", "Hello!", "Tell me a joke."]

    def ask(question: str):
        kwargs = dict(
            model=model_id,
            messages=[{"role": "user", "content": question}],
            tools=[WEATHER, TIME],
            tool_choice="required",
            parallel_tool_calls=parallel,
            max_tokens=200,
            temperature=0,
        )
        if stream:
            with client.chat.completions.stream(**kwargs) as events:
                return events.get_final_completion().choices[0]
        return client.chat.completions.create(**kwargs).choices[0]

    answers = run_all([lambda q=q: ask(q) for q in questions])  # one batch: decoded side by side
    for question, choice in zip(questions, answers):
        calls = choice.message.tool_calls
        assert calls, (question, choice)
        for call in calls:
            check_call(call)
        if not parallel:  # one call, then the array closes
            assert len(calls) == 1 and choice.finish_reason == "tool_calls", (question, choice)
        else:  # calls until the model closes the array (or the length runs out)
            assert choice.finish_reason in ("tool_calls", "length"), (question, choice)


def test_named_tool_choice_calls_exactly_that_function(client, model_id):
    def call(name: str):
        return lambda: client.chat.completions.create(
            model=model_id,
            messages=[{"role": "user", "content": "Help me plan my day in Berlin."}],
            tools=[WEATHER, TIME],
            tool_choice={"type": "function", "function": {"name": name}},
            temperature=0,
            max_tokens=200,
        )

    names = ("get_weather", "get_time")
    for name, answer in zip(names, run_all([call(n) for n in names])):
        choice = answer.choices[0]
        assert choice.finish_reason == "stop"  # OpenAI's (and vLLM's) finish for a forced function
        [call] = choice.message.tool_calls
        assert call.function.name == name
        check_call(call)


class City(BaseModel):
    name: str
    country: str
    population: int
    capital: bool


def test_parse_with_a_pydantic_model_unary_and_streamed(client, model_id):
    messages = ask("facts about the city of Lyon")
    parsed = client.chat.completions.parse(
        model=model_id, messages=messages, response_format=City, max_tokens=150, temperature=0
    )
    assert isinstance(parsed.choices[0].message.parsed, City)
    with client.chat.completions.stream(
        model=model_id, messages=messages, response_format=City, max_tokens=150, temperature=0
    ) as events:
        kinds = {event.type for event in events}
        final = events.get_final_completion()
    assert isinstance(final.choices[0].message.parsed, City)
    assert "content.delta" in kinds and final.choices[0].message.parsed == parsed.choices[0].message.parsed


def test_unconstrained_streams_decode_as_without_constrained_neighbours(client, model_id):
    prompts = ["Count from one to ten.", "Name three rivers.", "Write a haiku about snow.", "Explain rain briefly."]

    def plain(prompt: str):
        return lambda: client.chat.completions.create(
            model=model_id, messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=48
        )

    def constrained(index: int):
        name, schema = SCHEMAS[index]
        return lambda: client.chat.completions.create(
            model=model_id,
            messages=ask(name),
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
            temperature=0,
            max_tokens=48,
        )

    alone = run_all([plain(p) for p in prompts])
    mixed = run_all([plain(p) for p in prompts] + [constrained(i) for i in range(4)])
    for before, after in zip(alone, mixed[: len(prompts)]):
        assert after.choices[0].message.content == before.choices[0].message.content


def test_a_bad_schema_is_a_400_naming_the_field(client, model_id):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=model_id,
            messages=ask("anything"),
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True, "minItems": 2}},
            },
            max_tokens=5,
        )
    assert caught.value.code == "INVALID_GRAMMAR"
    assert caught.value.param == "response_format"  # the client's field, not the engine's path


# Only llguidance takes it (our xgrammar lowering refuses length bounds beside a pattern): the engine's rule
# (engine_svc/structured/dual_backend.py) compiles it there, and the mask path runs llguidance's matcher.
ON_LLGUIDANCE = {
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$", "minLength": 2, "maxLength": 4}},
    "required": ["code"],
    "additionalProperties": False,
}


def test_a_schema_only_llguidance_takes_is_followed(client, model_id):
    results = run_all(
        [
            lambda seed=seed: client.chat.completions.create(
                model=model_id,
                messages=ask("an airport code"),
                response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": ON_LLGUIDANCE}},
                max_tokens=24,
                temperature=1.0,
                seed=seed,
            )
            for seed in range(3)
        ]
    )
    for result in results:
        assert result.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(result.choices[0].message.content), ON_LLGUIDANCE)


@pytest.fixture(scope="module")
def thinking_client(tmp_path_factory):
    """A stack whose chat template opens a <think> block (Qwen3's style) and render's reasoning parser."""
    template = ["--chat-template", str(THINK_TEMPLATE)]
    config = StackConfig(
        port=0,
        log_dir=tmp_path_factory.mktemp("thinking-stack-logs"),
        service_args={
            "render": [*template, "--reasoning-parser", "qwen3"],
            "engine": template,
            "derender": [*template, "--reasoning-parser", "qwen3"],
        },
    )
    with Stack(config) as stack, openai.OpenAI(base_url=stack.rest_url + "/v1", api_key="x", max_retries=0) as sdk:
        yield sdk, sdk.models.list().data[0].id


def test_the_grammar_constrains_only_the_answer_after_the_reasoning(thinking_client):
    client, model_id = thinking_client
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 100}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    # The assistant turn opens the block and the model writes its reasoning freely; a bias on `</` lets this
    # small model close it after a few words, as a reasoning model would.
    messages = [
        {"role": "user", "content": "What is two plus two? Answer in JSON."},
        {"role": "assistant", "content": "<think>\nTwo plus two"},
    ]
    close = client.chat.completions.create(
        model=model_id,
        messages=messages,
        response_format=fmt,
        max_tokens=120,
        temperature=0,
        logit_bias={"9617": 6},
        extra_body={"continue_final_message": True, "add_generation_prompt": False},
    )
    message = close.choices[0].message
    reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    assert reasoning and not reasoning.strip().startswith("{")  # free text: the grammar did not apply there
    assert close.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(message.content), schema)  # the answer after </think> did follow it
    thinking_off = client.chat.completions.create(
        model=model_id,
        messages=[{"role": "user", "content": "What is two plus two? Answer in JSON."}],
        response_format=fmt,
        max_tokens=60,
        temperature=0,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    jsonschema.validate(json.loads(thinking_off.choices[0].message.content), schema)


def test_a_thinking_budget_closes_the_block_and_the_answer_follows(thinking_client):
    """vLLM's `thinking_token_budget` end to end: left alone this small model never closes its block; with a budget of 6 the engine forces `</think>` (three ids here, forced one by one) after 6
    tokens, derender splits the reasoning there, and the answer follows."""
    client, model_id = thinking_client
    messages = [
        {"role": "user", "content": "What is two plus two?"},
        {"role": "assistant", "content": "<think>\nTwo plus two"},
    ]
    common = dict(model=model_id, messages=messages, max_tokens=40, temperature=0, stream=False)
    continued = {"continue_final_message": True, "add_generation_prompt": False}
    free = client.chat.completions.create(**common, extra_body=continued)
    capped = client.chat.completions.create(**common, extra_body={**continued, "thinking_token_budget": 6})
    free_message, capped_message = free.choices[0].message, capped.choices[0].message
    assert not free_message.content  # it ends (EOS or the cap) still inside the block
    reasoning = getattr(capped_message, "reasoning_content", None) or getattr(capped_message, "reasoning", None)
    free_reasoning = getattr(free_message, "reasoning_content", None) or getattr(free_message, "reasoning", None)
    assert reasoning and free_reasoning.startswith(reasoning.rstrip())  # the same 6 tokens, then cut
    assert capped_message.content  # the answer after the forced end


# What xgrammar alone builds from one keyword family (issue 38's probe): enforced through the gateway, or refused.
PROBE = {
    "type beside anyOf": {"type": "string", "anyOf": [{"minLength": 2}, {"const": "x"}]},
    "properties beside oneOf": {
        "type": "object",
        "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["id"],
        "oneOf": [
            {"properties": {"kind": {"const": "cat"}}, "required": ["kind"]},
            {"properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}}, "required": ["kind", "good"]},
        ],
    },
    "$ref with siblings": {
        "$defs": {"name": {"type": "string", "maxLength": 12}},
        "type": "object",
        "properties": {"city": {"$ref": "#/$defs/name", "minLength": 3}},
        "required": ["city"],
    },
    "required of an unlisted name": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city", "country"],
        "additionalProperties": {"type": "string", "maxLength": 20},
    },
}


def test_the_probe_is_enforced_or_refused(client, model_id):
    def call(schema: dict, seed: int):
        return lambda: client.chat.completions.create(
            model=model_id,
            messages=ask("a pet or a city"),
            response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema, "strict": True}},
            max_tokens=48,
            temperature=1.0,
            seed=seed,
        )

    calls = [(name, call(schema, seed)) for name, schema in PROBE.items() for seed in range(2)]
    stopped = 0
    for (name, _), result in zip(calls, run_all([c for _, c in calls])):
        choice = result.choices[0]
        if choice.finish_reason == "stop":
            stopped += 1
            value = json.loads(choice.message.content)
            validator = jsonschema.Draft202012Validator(
                PROBE[name], format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
            )
            assert validator.is_valid(value), (name, choice.message.content)
    assert stopped >= len(calls) // 2
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=model_id,
            messages=ask("a number"),
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"oneOf": [{"type": "integer"}, {"type": "number"}]}},
            },
            max_tokens=5,
        )
    assert caught.value.code == "INVALID_GRAMMAR" and "#/oneOf" in caught.value.message


@pytest.mark.parametrize("parallel", [False, True])
def test_forced_tool_calls_end_as_calls_at_the_default_temperature(client, model_id, parallel):
    """Compact JSON: a forced call at temperature 1 fits in 64 tokens (issue 38: 4 of 8 ended `length` on
    whitespace when any was allowed). With parallel calls (the default) this 135M model opens a second call in
    about a third of runs, which 64 tokens cannot hold: the engine's item budget ends the list instead
    (engine_svc/structured/items.py), so every call is whole either way."""

    def call(seed: int):
        return lambda: client.chat.completions.create(
            model=model_id,
            messages=[{"role": "user", "content": "What is the weather in Oslo?"}],
            tools=[WEATHER, TIME],
            tool_choice="required",
            parallel_tool_calls=parallel,
            max_tokens=64,
            seed=seed,
        )

    choices = [result.choices[0] for result in run_all([call(seed) for seed in range(20)])]
    ended = [choice for choice in choices if choice.finish_reason == "tool_calls"]
    assert len(ended) >= 19, [(c.finish_reason, c.message.tool_calls) for c in choices]
    for choice in choices:  # every call whole (where a cut came, every call before it)
        calls = choice.message.tool_calls or []
        for each in calls if choice.finish_reason == "tool_calls" else calls[:1]:
            check_call(each)
