"""What a real SDK still hit, against the real stack behind the gateway: chat `echo` (JSON, typed and streamed
routes), empty user turns refused as OpenAI refuses them (REST and gRPC), a tool call cut by max_tokens accepted
back in history, `responses.input_tokens.count`, and the smaller refusals in the client's own words."""

from __future__ import annotations

import grpc
import openai
import pytest
import requests
from google.protobuf import json_format

from scaleout.v1 import chat_pb2_grpc, render_pb2
from tests.gateway.rest import error_reason, post, sse_events

pytestmark = pytest.mark.slow

CONTINUED = [
    {"role": "user", "content": "Count from one to ten, with digits."},
    {"role": "assistant", "content": "1, 2, 3,"},
]
CONTINUE = {"add_generation_prompt": False, "continue_final_message": True, "max_tokens": 6, "temperature": 0}


def _chat(stack, path: str, **fields) -> dict:
    answer = post(stack, path, {"messages": CONTINUED, **CONTINUE, **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _streamed_text(stack, path: str, **fields) -> str:
    answer = post(stack, path, {"messages": CONTINUED, **CONTINUE, **fields})
    assert answer.status_code == 200, answer.text
    return "".join(
        choice["delta"].get("content") or "" for event in sse_events(answer) for choice in event.get("choices", [])
    )


def test_chat_echo_puts_the_continued_message_first_on_every_route(stack, client, model_id):
    """vLLM's chat echo: the last message (the one the answer continues) comes before the continuation."""
    plain = _chat(stack, "/v1/chat/completions")["choices"][0]["message"]["content"]
    assert plain and not plain.startswith("1, 2, 3,")
    echoed = CONTINUED[-1]["content"] + plain
    assert _chat(stack, "/v1/chat/completions", echo=True)["choices"][0]["message"]["content"] == echoed
    assert _streamed_text(stack, "/v1/chat/completions", echo=True, stream=True) == echoed
    assert _chat(stack, "/v1/chat/completions/typed", echo=True)["choices"][0]["message"]["content"] == echoed
    assert _streamed_text(stack, "/v1/chat/completions/stream", echo=True) == echoed
    sdk = client.chat.completions.create(model=model_id, messages=CONTINUED, extra_body={**CONTINUE, "echo": True})
    assert sdk.choices[0].message.content == echoed
    # A new turn (the generation prompt after a user message) echoes nothing, as in vLLM.
    fresh = post(stack, "/v1/chat/completions", {"messages": CONTINUED[:1], "max_tokens": 4, "temperature": 0})
    new_turn = post(
        stack, "/v1/chat/completions", {"messages": CONTINUED[:1], "max_tokens": 4, "temperature": 0, "echo": True}
    )
    assert new_turn.json()["choices"][0]["message"] == fresh.json()["choices"][0]["message"]


EMPTY_TURNS = {
    "no content": [{"role": "user"}],
    "null content": [{"role": "user", "content": None}],
    "no parts": [{"role": "user", "content": []}],
}


@pytest.mark.parametrize("name", EMPTY_TURNS)
def test_an_empty_user_turn_is_refused_on_rest(stack, name):
    for path in ("/v1/chat/completions", "/v1/chat/completions/typed", "/v1/chat/completions/render"):
        answer = post(stack, path, {"messages": EMPTY_TURNS[name], "max_tokens": 4})
        assert answer.status_code == 400, (path, answer.text)
        assert error_reason(answer) == "INVALID_CONTENT"
        if "error" in answer.json():
            assert answer.json()["error"]["param"] == "messages[0].content"


def test_an_empty_user_turn_is_refused_over_grpc(stack):
    """A grpc-js user with keepCase who writes `{string_value: ...}` loses the content client-side: refused."""
    request = json_format.ParseDict({"messages": [{"role": "user"}], "max_tokens": 4}, render_pb2.RenderChatRequest())
    with stack.grpc_channel() as channel, pytest.raises(grpc.RpcError) as refused:
        chat_pb2_grpc.ChatServiceStub(channel).CreateChatCompletion(request, timeout=60)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "a user message needs content" in (refused.value.details() or "")


def test_a_tool_call_cut_by_max_tokens_goes_back_in_history(stack, client, model_id):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ]
    asked = {"model": model_id, "tools": tools, "temperature": 0}
    first = client.chat.completions.create(
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=4,
        **asked,
    )
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "length" and call.function.arguments.startswith("{")
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        first.choices[0].message.model_dump(exclude_none=True),  # as every agent loop sends it back
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ]
    again = client.chat.completions.create(messages=history, max_tokens=4, **asked)
    assert again.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_responses_input_tokens_count(stack, client, model_id):
    counted = client.responses.input_tokens.count(model=model_id, input="What is the capital of France?")
    assert counted.object == "response.input_tokens"
    rendered = post(stack, "/v1/responses/render/typed", {"model": model_id, "input": "What is the capital of France?"})
    assert counted.input_tokens == len(rendered.json()["generate_request"]["token_ids"]) > 0
    briefly = {"model": model_id, "input": "hi", "instructions": "Be brief."}
    rendered = post(stack, "/v1/responses/render/typed", briefly).json()["generate_request"]["token_ids"]
    assert client.responses.input_tokens.count(**briefly).input_tokens == len(rendered)
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.input_tokens.count(model=model_id, input="hi", extra_body={"max_output_tokens": 5})
    assert refused.value.body["param"] == "max_output_tokens"


def test_smaller_refusals_speak_the_clients_words(stack, model_id):
    chat = {"model": model_id, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    for field, replacement in (("guided_json", "structured_outputs"), ("guided_choice", "structured_outputs")):
        answer = post(stack, "/v1/chat/completions", {**chat, field: ["a", "b"]})
        assert answer.status_code == 400 and replacement in answer.json()["error"]["message"], answer.text
    for kind in (["text"], {"a": 1}):
        parts = [{"type": kind, "text": "x"}]
        answer = post(stack, "/v1/chat/completions", {**chat, "messages": [{"role": "user", "content": parts}]})
        assert answer.status_code == 400 and error_reason(answer) == "INVALID_CONTENT", answer.text
    card = requests.get(stack.rest_url + "/v1/models", timeout=30).json()["data"][0]
    assert card["root"] == card["id"] and "/" not in card["root"]
    answer = post(stack, "/v1/responses", {"model": model_id, "input": "hi", "max_output_tokens": -1})
    error = answer.json()["error"]
    assert answer.status_code == 400 and error["param"] == "max_output_tokens", answer.text
    assert "max_output_tokens" in error["message"] and "max_tokens" not in error["message"].replace("max_output", "")
    answer = post(stack, "/v1/responses", {"model": model_id, "input": "hi", "max_tool_calls": -1})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "max_tool_calls", answer.text
