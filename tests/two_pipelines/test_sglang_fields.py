"""SGLang's request fields (and vLLM's include_reasoning) through the gateway's one-hop routes, as vllm-router and
SMG forward them: each one's effect, unary and streamed. The engine is held to `<think>…</think>answer` by a
regex, so the model (which never reasons on its own) writes a reasoning block derender's `think` parser reads."""

from __future__ import annotations

import pytest

from tests.gateway.rest import post, sse_events

pytestmark = pytest.mark.slow

REASONED = {
    "messages": [{"role": "user", "content": "Why is the sky blue?"}],
    "temperature": 0,
    "max_tokens": 60,
    "structured_outputs": {"regex": "<think>[a-z ]{8,30}</think>[A-Za-z ]{4,20}"},
}
# What vllm-router 0.1.17 adds to every chat body (captured in front of an echo server).
VLLM_ROUTER_CHAT = {
    "logprobs": False,
    "no_stop_trim": False,
    "ignore_eos": False,
    "continue_final_message": False,
    "skip_special_tokens": True,
    "separate_reasoning": True,
    "stream_reasoning": True,
    "return_hidden_states": False,
    "include_reasoning": True,
}


def ask(stack, **fields) -> dict:
    answer = post(stack, "/v1/chat/completions", {**REASONED, **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()["choices"][0]["message"]


def streamed(stack, **fields) -> list[dict]:
    """The deltas of a streamed answer that carry text or reasoning."""
    answer = post(stack, "/v1/chat/completions", {**REASONED, **fields, "stream": True})
    deltas = [c["delta"] for e in sse_events(answer) for c in e["choices"]]
    return [d for d in deltas if d.get("content") or d.get("reasoning_content")]


def test_vllm_routers_defaults_change_nothing(stack):
    plain = ask(stack)
    assert plain["reasoning_content"] and plain["content"]
    assert ask(stack, **VLLM_ROUTER_CHAT) == plain


def test_separate_reasoning_false_leaves_it_in_the_content(stack):
    plain, whole = ask(stack), ask(stack, separate_reasoning=False)
    assert whole.get("reasoning_content") is None
    assert whole["content"] == f"<think>{plain['reasoning_content']}</think>{plain['content']}"
    deltas = streamed(stack, separate_reasoning=False)
    assert "".join(d.get("content") or "" for d in deltas) == whole["content"]
    assert not any(d.get("reasoning_content") for d in deltas)


def test_include_reasoning_false_leaves_it_out(stack):
    plain, without = ask(stack), ask(stack, include_reasoning=False)
    assert without.get("reasoning_content") is None and without["content"] == plain["content"]
    deltas = streamed(stack, include_reasoning=False)
    assert not any(d.get("reasoning_content") for d in deltas)
    assert "".join(d.get("content") or "" for d in deltas) == plain["content"]


def test_stream_reasoning_false_sends_it_whole_when_it_ends(stack):
    plain = ask(stack)
    as_it_comes = [d["reasoning_content"] for d in streamed(stack) if d.get("reasoning_content")]
    assert len(as_it_comes) > 1 and "".join(as_it_comes) == plain["reasoning_content"]
    deltas = streamed(stack, stream_reasoning=False)
    reasoned = [i for i, d in enumerate(deltas) if d.get("reasoning_content")]
    assert reasoned == [0] and deltas[0]["reasoning_content"] == plain["reasoning_content"]
    assert "".join(d.get("content") or "" for d in deltas) == plain["content"]
    assert ask(stack, stream_reasoning=False) == plain  # a whole answer has it whole anyway


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/completions"])
def test_no_stop_trim_keeps_the_stop_string(stack, route):
    if route == "/v1/chat/completions":
        body = {"messages": [{"role": "user", "content": "What is the capital of France?"}]}
    else:
        body = {"prompt": "The capital of France is"}
    body |= {"temperature": 0, "max_tokens": 24, "stop": ["Paris"]}

    def text(**fields) -> tuple[str, str]:
        whole = post(stack, route, {**body, **fields}).json()["choices"][0]
        events = sse_events(post(stack, route, {**body, **fields, "stream": True}))
        pieces = [c.get("delta", {}).get("content") or c.get("text") or "" for e in events for c in e["choices"]]
        return whole.get("message", whole).get("content", whole.get("text")), "".join(pieces)

    trimmed, kept = text(), text(no_stop_trim=True)
    assert trimmed[0] == trimmed[1] and kept[0] == kept[1]
    assert "Paris" not in trimmed[0] and kept[0] == trimmed[0] + "Paris"


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/completions"])
def test_hidden_states_false_is_accepted_and_true_refused(stack, route):
    body = {"messages": [{"role": "user", "content": "Hi"}]} if "chat" in route else {"prompt": "Hi"}
    body |= {"max_tokens": 2}
    assert post(stack, route, {**body, "return_hidden_states": False}).status_code == 200
    refused = post(stack, route, {**body, "return_hidden_states": True})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["param"]) == ("UNSUPPORTED_FIELD", "return_hidden_states")


def test_regex_ebnf_and_json_schema_constrain_the_output(stack):
    """SGLang's constraint fields: chat's `regex` and `ebnf`, and completions' `json_schema` (JSON text) too."""

    def text(route: str, **fields) -> str:
        chat = route == "/v1/chat/completions"
        body = {"messages": [{"role": "user", "content": "Say hi"}]} if chat else {"prompt": "Say hi"}
        answer = post(stack, route, {**body, "temperature": 0, "max_tokens": 12, **fields})
        assert answer.status_code == 200, answer.text
        choice = answer.json()["choices"][0]
        return choice["message"]["content"] if chat else choice["text"]

    assert text("/v1/chat/completions", regex="(Paris|London)") in ("Paris", "London")
    assert text("/v1/completions", ebnf='root ::= "Hello" | "Hi"') in ("Hello", "Hi")
    schema = '{"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]}'
    assert text("/v1/completions", json_schema=schema) in ('{"a": true}', '{"a": false}')
    both = post(
        stack,
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "Hi"}], "regex": "a", "ebnf": 'root ::= "b"'},
    )
    assert both.status_code == 400 and both.json()["error"]["param"] == "ebnf"
