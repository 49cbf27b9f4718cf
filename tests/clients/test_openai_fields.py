"""Every OpenAI request field, walked through the gateway: honoured (200 and its effect seen) or refused (400 whose
`param` names it). None may be accepted and dropped.

The tables list every field of OpenAI's API reference for `POST /v1/chat/completions` and `POST /v1/completions`,
and a test checks they also cover every field the installed `openai` SDK can send, so a field added to the API
fails here until it is classified. Each field is sent alone on a small request with a representative non-default
value; an honoured field's check looks for its effect (usually against the same request without it, greedy).
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from google.protobuf import json_format
from openai.types import completion_create_params
from openai.types.chat import completion_create_params as chat_create_params

from pipeline_svc import openai_request
from scaleout_common.errors import ServiceError
from tests.clients.prompts import COUNT, WEATHER, WEATHER_TOOLS, WEATHER_TWO_CITIES
from tests.gateway.rest import post

slow = pytest.mark.slow

# OpenAI's API reference, request body of "Create chat completion" and "Create completion".
OPENAI_CHAT_FIELDS = [
    "messages",
    "model",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
]
OPENAI_COMPLETION_FIELDS = [
    "model",
    "prompt",
    "best_of",
    "echo",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "max_tokens",
    "n",
    "presence_penalty",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "suffix",
    "temperature",
    "top_p",
    "user",
]

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
POEM = [{"role": "user", "content": "Write a poem"}]
CAT = "The cat sat on the mat. The cat"


class Walker:
    """Sends one route's requests: the field under test over a small greedy-able base request."""

    def __init__(self, stack, path: str, base: dict):
        self.stack, self.path, self.base = stack, path, base

    def send(self, **fields):
        return post(self.stack, self.path, {**self.base, **fields})

    def ask(self, **fields) -> dict:
        answer = self.send(**fields)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def token_id(self, text: str) -> int:
        (token,) = post(self.stack, "/tokenize", {"prompt": text, "add_special_tokens": False}).json()["tokens"]
        return token


@dataclass
class Case:
    value: object  # a representative non-default value
    check: Callable[[Walker, dict], None] | None  # None: refused with 400 naming the field
    extra: dict | None = None  # fields the value needs beside it (top_logprobs needs logprobs)
    refusable: bool = False  # being built: either refused or honoured with its effect seen, never ignored


REFUSED = None
GREEDY = {"temperature": 0}  # a sampled answer may end (EOS) before a small token cap: "stop", not "length"


def sse_events(answer) -> list[dict]:
    """The JSON events of an OpenAI stream, which ends with `data: [DONE]` (test_sse.py checks the framing)."""
    assert answer.headers["content-type"].startswith("text/event-stream"), answer.text
    assert answer.text.endswith("data: [DONE]\n\n")
    lines = [line[len("data: ") :] for line in answer.text.split("\n\n") if line.startswith("data: ")]
    return [json.loads(line) for line in lines[:-1]]


def texts(answer: dict) -> list[str]:
    return [c["message"]["content"] if "message" in c else c["text"] for c in answer["choices"]]


def changes_greedy_output(field: str, value, **request) -> Callable[[Walker, dict], None]:
    """The field's value changes a greedy answer the request gives without it."""

    def check(walk: Walker, _: dict) -> None:
        plain = walk.ask(temperature=0, max_tokens=12, **request)
        assert texts(walk.ask(temperature=0, max_tokens=12, **request, **{field: value})) != texts(plain)

    return check


def seed_reproduces(walk: Walker, _: dict) -> None:
    def sample(seed: int) -> list[str]:
        return texts(walk.ask(temperature=1.0, max_tokens=8, seed=seed))

    first = sample(7)
    assert sample(7) == first
    assert len({tuple(first), tuple(sample(8)), tuple(sample(9))}) > 1, "the seed changes nothing"


def greedy_at(field: str, value) -> Callable[[Walker, dict], None]:
    """A value that leaves one candidate makes three samples one greedy answer; temperature 1 alone does not."""

    def check(walk: Walker, _: dict) -> None:
        greedy = texts(walk.ask(temperature=0, max_tokens=8))[0]
        sampled = {field: value} if field == "temperature" else {"temperature": 1.0, field: value}
        assert texts(walk.ask(max_tokens=8, n=3, **sampled)) == [greedy] * 3
        assert len(set(texts(walk.ask(max_tokens=8, n=3, temperature=1.5)))) > 1

    return check


def biased_to(text: str) -> Callable[[Walker, dict], None]:
    def check(walk: Walker, _: dict) -> None:
        answer = walk.ask(max_tokens=4, logit_bias={str(walk.token_id(text)): 100})
        assert texts(answer) == [text * 4]

    return check


def counts_tokens(walk: Walker, answer: dict) -> None:
    assert answer["usage"]["completion_tokens"] == 3
    assert [c["finish_reason"] for c in answer["choices"]] == ["length"]


def n_choices(walk: Walker, answer: dict) -> None:
    assert [c["index"] for c in answer["choices"]] == [0, 1]


def streams_sse(walk: Walker, _: dict) -> None:
    answer = walk.send(stream=True)
    events = sse_events(answer)
    assert answer.text.endswith("data: [DONE]\n\n") and events and all(e["choices"] for e in events)


def usage_chunk_last(walk: Walker, _: dict) -> None:
    events = sse_events(walk.send(stream=True, stream_options={"include_usage": True}))
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] > 0
    assert all(e["usage"] is None for e in events[:-1])


def accepted(walk: Walker, answer: dict) -> None:
    """Nothing to see in the response: `user` / `safety_identifier` / `metadata` go on the request's trace span."""
    assert answer["choices"]


def stops_at(stop: str, **request) -> Callable[[Walker, dict], None]:
    def check(walk: Walker, _: dict) -> None:
        plain = texts(walk.ask(temperature=0, max_tokens=12, **request))[0]
        assert stop in plain  # the stop string would be generated
        answer = walk.ask(temperature=0, max_tokens=12, stop=[stop], **request)
        (choice,) = answer["choices"]
        assert choice["finish_reason"] == "stop" and choice["stop_reason"] == choice["matched_stop"] == stop
        assert texts(answer) == [plain[: plain.index(stop)]]

    return check


# --------------------------------------------------------------------------------------------------------- chat


def chat_messages(walk: Walker, answer: dict) -> None:
    assert answer["usage"]["prompt_tokens"] > walk.ask()["usage"]["prompt_tokens"]


def chat_model(walk: Walker, answer: dict) -> None:
    assert answer["model"] == walk.base["model"]


def chat_logprobs(walk: Walker, answer: dict) -> None:
    (choice,) = answer["choices"]
    assert len(choice["logprobs"]["content"]) == answer["usage"]["completion_tokens"]
    assert walk.ask()["choices"][0]["logprobs"] is None


def chat_top_logprobs(walk: Walker, answer: dict) -> None:
    entries = answer["choices"][0]["logprobs"]["content"]
    assert entries and all(len(e["top_logprobs"]) == 2 for e in entries)


def chat_one_tool_call_only(walk: Walker, _: dict) -> None:
    request = dict(messages=WEATHER_TWO_CITIES, tools=WEATHER_TOOLS, temperature=0, max_tokens=60)
    assert len(walk.ask(**request)["choices"][0]["message"]["tool_calls"]) == 2
    calls = walk.ask(parallel_tool_calls=False, **request)["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Paris"}]


def chat_reasoning_effort(walk: Walker, answer: dict) -> None:
    """The template's `reasoning_effort` (the default model's template reads none: the answer is the same), winning
    over a `chat_template_kwargs` entry as in vLLM (found with LangChain ChatOpenAI and the Agents SDK)."""
    assert texts(answer) == texts(walk.ask(temperature=0, chat_template_kwargs={"reasoning_effort": "low"}))
    body = {"messages": COUNT, "reasoning_effort": "low", "chat_template_kwargs": {"reasoning_effort": "high", "x": 1}}
    typed = openai_request.chat_request(json.dumps(body).encode()).typed
    assert json_format.MessageToDict(typed.chat_template_kwargs) == {"reasoning_effort": "low", "x": 1}


def chat_tool_choice_none(walk: Walker, _: dict) -> None:
    message = walk.ask(messages=WEATHER, tools=WEATHER_TOOLS, tool_choice="none", temperature=0, max_tokens=40)
    message = message["choices"][0]["message"]
    assert "tool_calls" not in message and "get_weather" in message["content"]  # left as text, not parsed


def chat_tools(walk: Walker, _: dict) -> None:
    answer = walk.ask(messages=WEATHER, tools=WEATHER_TOOLS, temperature=0, max_tokens=40)
    (choice,) = answer["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"


def chat_json_object(walk: Walker, _: dict) -> None:
    """JSON mode: the greedy answer to a question answered in prose begins a JSON value."""
    assert not texts(walk.ask(temperature=0, max_tokens=12))[0].lstrip().startswith("{")
    answer = texts(walk.ask(temperature=0, max_tokens=12, response_format={"type": "json_object"}))[0]
    assert answer.lstrip().startswith("{"), f"response_format json_object was accepted and ignored: {answer!r}"


CHAT_CASES: dict[str, Case] = {
    "messages": Case([{"role": "user", "content": COUNT[0]["content"] * 3}], chat_messages),
    "model": Case(None, chat_model),  # the served model (filled in by the test)
    "audio": Case({"voice": "alloy", "format": "wav"}, REFUSED),
    "frequency_penalty": Case(2.0, changes_greedy_output("frequency_penalty", 2.0, messages=POEM)),
    "function_call": Case("auto", REFUSED),
    "functions": Case([{"name": "get_weather", "parameters": {"type": "object"}}], REFUSED),
    "logit_bias": Case({"0": -100}, biased_to("!")),
    "logprobs": Case(True, chat_logprobs),
    "max_completion_tokens": Case(3, counts_tokens, extra=GREEDY),
    "max_tokens": Case(3, counts_tokens, extra=GREEDY),
    "metadata": Case({"team": "search"}, accepted),  # on the request's trace span
    "modalities": Case(["text", "audio"], REFUSED),
    "moderation": Case({"model": "omni-moderation-latest"}, REFUSED),
    "n": Case(2, n_choices),
    "parallel_tool_calls": Case(False, chat_one_tool_call_only),
    "prediction": Case({"type": "content", "content": "1, 2, 3"}, REFUSED),
    "presence_penalty": Case(2.0, changes_greedy_output("presence_penalty", 2.0, messages=POEM)),
    "prompt_cache_key": Case("user-42-counting", accepted),  # the routing key (tests/render/test_routing_key.py)
    "prompt_cache_options": Case({}, REFUSED),
    "prompt_cache_retention": Case("24h", REFUSED),
    "reasoning_effort": Case("low", chat_reasoning_effort, extra=GREEDY),
    "response_format": Case({"type": "json_object"}, chat_json_object, refusable=True),
    "safety_identifier": Case("hashed-user-42", accepted),
    "seed": Case(7, seed_reproduces),
    "service_tier": Case("flex", REFUSED),
    "stop": Case(["\n"], stops_at("\n")),
    "store": Case(True, REFUSED),
    "stream": Case(True, streams_sse),
    "stream_options": Case({"include_usage": True}, usage_chunk_last, extra={"stream": True}),
    "temperature": Case(0.0, greedy_at("temperature", 0.0)),
    "tool_choice": Case("none", chat_tool_choice_none, extra={"tools": WEATHER_TOOLS}),
    "tools": Case(WEATHER_TOOLS, chat_tools),
    "top_logprobs": Case(2, chat_top_logprobs, extra={"logprobs": True}),
    "top_p": Case(1e-6, greedy_at("top_p", 1e-6)),
    "user": Case("user-42", accepted),
    "verbosity": Case("low", REFUSED),
    "web_search_options": Case({"search_context_size": "low"}, REFUSED),
}


# -------------------------------------------------------------------------------------------------- completions


def completion_prompt(walk: Walker, answer: dict) -> None:
    tokens = post(walk.stack, "/tokenize", {"prompt": CAT, "add_special_tokens": False}).json()["tokens"]
    assert answer["usage"]["prompt_tokens"] == len(tokens)


def completion_echo(walk: Walker, answer: dict) -> None:
    (choice,) = answer["choices"]
    plain = walk.ask(temperature=0)["choices"][0]["text"]
    assert texts(walk.ask(temperature=0, echo=True)) == [walk.base["prompt"] + plain]
    assert choice["text"].startswith(walk.base["prompt"])


def completion_logprobs(walk: Walker, answer: dict) -> None:
    logprobs = answer["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == len(logprobs["token_logprobs"]) == answer["usage"]["completion_tokens"]
    # up to logprobs + 1: the sampled token is always among its alternatives (OpenAI's legacy completions, vLLM)
    assert all(token in top and 1 <= len(top) <= 3 for token, top in zip(logprobs["tokens"], logprobs["top_logprobs"]))
    assert walk.ask()["choices"][0]["logprobs"] is None


COMPLETION_CASES: dict[str, Case] = {
    "model": Case(None, chat_model),
    "prompt": Case(CAT, completion_prompt),
    "best_of": Case(2, REFUSED),  # best_of other than n: see NO_OP_VALUES for best_of == n
    "echo": Case(True, completion_echo),
    "frequency_penalty": Case(2.0, changes_greedy_output("frequency_penalty", 2.0)),
    "logit_bias": Case({"0": -100}, biased_to("!")),
    "logprobs": Case(2, completion_logprobs),
    "max_tokens": Case(3, counts_tokens, extra=GREEDY),
    "n": Case(2, n_choices),
    "presence_penalty": Case(2.0, changes_greedy_output("presence_penalty", 2.0)),
    "seed": Case(7, seed_reproduces),
    "stop": Case(".", stops_at(".")),
    "stream": Case(True, streams_sse),
    "stream_options": Case({"include_usage": True}, usage_chunk_last, extra={"stream": True}),
    "suffix": Case("\n\nThe end.", REFUSED),
    "temperature": Case(0.0, greedy_at("temperature", 0.0)),
    "top_p": Case(1e-6, greedy_at("top_p", 1e-6)),
    "user": Case("user-42", accepted),
}

# Values that change nothing, accepted as OpenAI's defaults.
NO_OP_VALUES = {
    CHAT: {
        "store": False,
        "modalities": ["text"],
        "response_format": {"type": "text"},
        "service_tier": "auto",
        "metadata": {},
        "verbosity": "medium",
        "temperature": None,  # null: not given
        "tools": None,
    },
    COMPLETIONS: {"best_of": 1, "echo": False, "suffix": None},
}


def _sdk_fields(params) -> set[str]:
    return set(typing.get_type_hints(params.CompletionCreateParamsBase)) | {"stream"}


def test_the_walk_covers_the_api_reference_and_the_sdk():
    assert set(CHAT_CASES) == set(OPENAI_CHAT_FIELDS) | _sdk_fields(chat_create_params)
    assert set(COMPLETION_CASES) == set(OPENAI_COMPLETION_FIELDS) | _sdk_fields(completion_create_params)


@pytest.fixture(scope="module")
def walkers(stack, model_id) -> dict[str, Walker]:
    return {
        CHAT: Walker(stack, CHAT, {"model": model_id, "messages": COUNT, "max_tokens": 4}),
        COMPLETIONS: Walker(stack, COMPLETIONS, {"model": model_id, "prompt": CAT, "max_tokens": 4}),
    }


def _walk(walk: Walker, field: str, case: Case) -> None:
    value = walk.base["model"] if field == "model" else case.value
    answer = walk.send(**(case.extra or {}), **{field: value})
    if case.check is REFUSED or (case.refusable and answer.status_code == 400):
        assert answer.status_code == 400, f"{field}={value!r} was accepted: {answer.text[:300]}"
        error = answer.json()["error"]
        assert (error["param"], error["code"], error["type"]) == (field, "UNSUPPORTED_FIELD", "invalid_request_error")
        assert field in error["message"]
        return
    assert answer.status_code == 200, answer.text
    case.check(walk, sse_events(answer) if case.extra and case.extra.get("stream") else answer_json(answer))


def answer_json(answer) -> dict:
    return {} if answer.headers["content-type"].startswith("text/event-stream") else answer.json()


@slow
@pytest.mark.parametrize("field", list(CHAT_CASES))
def test_chat_field(walkers, field):
    _walk(walkers[CHAT], field, CHAT_CASES[field])


@slow
@pytest.mark.parametrize("field", list(COMPLETION_CASES))
def test_completion_field(walkers, field):
    _walk(walkers[COMPLETIONS], field, COMPLETION_CASES[field])


@slow
@pytest.mark.parametrize(("path", "field"), [(p, f) for p, values in NO_OP_VALUES.items() for f in values])
def test_no_op_values_are_accepted(walkers, path, field):
    walkers[path].ask(**{field: NO_OP_VALUES[path][field]})


SAY_HI = "<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n"  # SmolLM2's template: it answers and ends


@slow
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
def test_matched_stop_is_sglangs(walkers, path):
    """SGLang's `matched_stop` beside vLLM's `stop_reason`: the EOS token's id where stop_reason is null, null at
    the length limit; streamed, on the finishing chunk."""
    walk = walkers[path]
    eos = walk.token_id("<|im_end|>")
    prompt = {"messages": [{"role": "user", "content": "Say hi"}]} if path == CHAT else {"prompt": SAY_HI}
    (ended,) = walk.ask(temperature=0, max_tokens=64, **prompt)["choices"]
    assert (ended["finish_reason"], ended["stop_reason"], ended["matched_stop"]) == ("stop", None, eos)
    (cut,) = walk.ask()["choices"]
    assert (cut["finish_reason"], cut["matched_stop"]) == ("length", None)
    *_, last = sse_events(walk.send(temperature=0, max_tokens=64, stream=True, **prompt))
    assert last["choices"][0]["matched_stop"] == eos


@slow
def test_completions_max_tokens_defaults_to_16(walkers):
    answer = walkers[COMPLETIONS].ask(max_tokens=None, ignore_eos=True)
    assert answer["usage"]["completion_tokens"] == 16


@slow
@pytest.mark.parametrize(("field", "value"), [("temperature", "hot"), ("n", 1.5), ("parallel_tool_calls", "yes")])
def test_a_value_of_the_wrong_type_is_a_400_naming_the_field(walkers, field, value):
    answer = walkers[CHAT].send(**{field: value})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == field


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", "hot"),
        ("max_tokens", "many"),
        ("n", 1.5),
        ("logprobs", "yes"),
        ("top_logprobs", True),
        ("parallel_tool_calls", "yes"),
        ("stop", [1]),
        ("messages", [{"role": 5, "content": "hi"}]),
        ("stream_options", {"include_usage": True, "unknown": 1}),
        ("reasoning_effort", 1),
        ("metadata", {"team": 1}),
        ("metadata", {f"k{i}": "v" for i in range(17)}),
    ],
)
def test_the_request_policy_names_a_malformed_field(field, value):
    """OpenAIService's request policy alone (no stack): a value of the wrong type names its top-level field."""
    body = {"messages": COUNT, "stream": True, field: value}
    with pytest.raises(ServiceError) as caught:
        openai_request.chat_request(json.dumps(body).encode())
    assert [f for f, _ in caught.value.violations] == [field]


def test_vllms_prompt_logprobs_and_tokens_as_token_ids_in_the_policy():
    """vLLM's `prompt_logprobs` on a unary completion or chat (refused streamed, as vLLM refuses a stream), and
    `return_tokens_as_token_ids` on both routes, reach the typed request (TRL's VLLMClient sends both)."""
    ids = {"return_tokens_as_token_ids": True}
    typed = openai_request.completion_request(json.dumps({"prompt": [[1, 2]], "prompt_logprobs": 3, **ids}).encode())
    assert typed.typed.prompt_logprobs == 3 and typed.typed.return_tokens_as_token_ids
    chat = openai_request.chat_request(json.dumps({"messages": COUNT, "prompt_logprobs": 0, **ids}).encode()).typed
    assert chat.return_tokens_as_token_ids and chat.HasField("prompt_logprobs") and chat.prompt_logprobs == 0
    for route, body in (
        (openai_request.chat_request, {"messages": COUNT, "prompt_logprobs": 0, "stream": True}),
        (openai_request.completion_request, {"prompt": "a", "prompt_logprobs": 1, "stream": True}),
    ):
        with pytest.raises(ServiceError) as caught:
            route(json.dumps(body).encode())
        assert caught.value.reason == "UNSUPPORTED_FIELD" and caught.value.violations[0][0] == "prompt_logprobs"


def test_metadata_goes_on_the_trace():
    parsed = openai_request.chat_request(json.dumps({"messages": COUNT, "metadata": {"team": "search"}}).encode())
    assert parsed.identity == {"metadata.team": "search"}
