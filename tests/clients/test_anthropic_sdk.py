"""The official `anthropic` Python SDK against the gateway, pointed at it as Claude Code users do
(`Anthropic(base_url=<gateway>)`): `messages.create` (unary and `stream=True`) and `messages.stream`, with text
and with tool use (a tool_use block, then its tool_result sent back). Every object the SDK hands back, every
raw stream event included, is validated with the SDK's own pydantic models in strict mode.

This SDK no longer takes `temperature`, so requests pass it in `extra_body` (greedy: answers are repeatable).
"""

from __future__ import annotations

import json
import re

import anthropic
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import BaseModel, TypeAdapter

from tests.gateway.rest import post

pytestmark = pytest.mark.slow

GREEDY = {"temperature": 0}
PARIS = [{"role": "user", "content": "What is the capital of France?"}]
# SmolLM2's template does not render `tools`, so the system prompt and one worked turn teach it the hermes format
# the stack's default tool parser reads; greedy, it then calls the tool, which comes back as a tool_use block.
TOOL_SYSTEM = (
    "You can call the tool get_weather. To call it, answer with exactly "
    '<tool_call>{"name": "get_weather", "arguments": {"city": "<city>"}}</tool_call> and nothing else.'
)
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
WEATHER = [
    {"role": "user", "content": "What is the weather in Rome?"},
    {"role": "assistant", "content": '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>'},
    {"role": "user", "content": "What is the weather in Paris?"},
]
STREAM_EVENT = TypeAdapter(RawMessageStreamEvent)


def strict_message(message: BaseModel) -> Message:
    return Message.model_validate(message.model_dump(), strict=True)


def strict_events(events: list) -> list[str]:
    for event in events:
        STREAM_EVENT.validate_python(event.model_dump(), strict=True)
    return [event.type for event in events]


@pytest.fixture(scope="module")
def claude(stack):
    with anthropic.Anthropic(base_url=stack.rest_url, api_key="unused", max_retries=0, timeout=120) as sdk:
        yield sdk


def test_create_text(claude, model_id):
    message = claude.messages.create(model=model_id, max_tokens=32, messages=PARIS, extra_body=GREEDY)
    strict_message(message)
    assert message.role == "assistant" and message.id.startswith("msg_")
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert [block.type for block in message.content] == ["text"]
    assert "Paris" in message.content[0].text
    assert message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0) > 0
    assert message.usage.output_tokens > 0


def test_create_with_system_blocks_and_a_stop_sequence(claude, model_id):
    message = claude.messages.create(
        model=model_id,
        max_tokens=32,
        # SmolLM2's template writes this very system prompt when none is given: the same prompt, the same answer.
        system=[{"type": "text", "text": "You are a helpful AI assistant named SmolLM, trained by Hugging Face"}],
        messages=PARIS,
        stop_sequences=[" Paris"],
        extra_body=GREEDY,
    )
    strict_message(message)
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == " Paris"
    assert message.content[0].text == "The capital of France is"


def test_max_tokens_is_the_stop_reason(claude, model_id):
    message = claude.messages.create(model=model_id, max_tokens=3, messages=PARIS, extra_body=GREEDY)
    strict_message(message)
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 3


def test_raw_stream_events(claude, model_id):
    unary = claude.messages.create(model=model_id, max_tokens=32, messages=PARIS, extra_body=GREEDY)
    events = list(claude.messages.create(model=model_id, max_tokens=32, messages=PARIS, stream=True, extra_body=GREEDY))
    kinds = strict_events(events)
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1] == "content_block_start" and kinds[-3] == "content_block_stop"
    assert set(kinds[2:-3]) == {"content_block_delta"}
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text == unary.content[0].text
    delta = events[-2]
    assert delta.delta.stop_reason == "end_turn" and delta.usage.output_tokens == unary.usage.output_tokens


def test_message_start_reports_the_cached_prompt(stack, claude, model_id):
    """message_start carries the input usage as the engine counted it, a repeated prompt's cached tokens included
    (consumers take input usage from it and output usage from message_delta), the same split as the answer's."""
    asked = dict(model=model_id, max_tokens=8, messages=PARIS, extra_body=GREEDY)
    claude.messages.create(**asked)  # the same prompt again below: served from the prefix cache
    unary = claude.messages.create(**asked).usage
    events = list(claude.messages.create(**asked, stream=True))
    strict_events(events)
    start, final = events[0].message.usage, events[-2].usage
    assert start.cache_read_input_tokens and start.cache_read_input_tokens > 0
    for answer in (unary, final):
        assert start.input_tokens == answer.input_tokens
        assert start.cache_read_input_tokens == answer.cache_read_input_tokens
    prompt = post(stack, "/tokenize", {"model": model_id, "messages": PARIS}).json()["count"]
    assert unary.input_tokens + (unary.cache_read_input_tokens or 0) == prompt
    assert start.input_tokens + start.cache_read_input_tokens + (start.cache_creation_input_tokens or 0) == prompt


def test_stream_helper_text(claude, model_id):
    unary = claude.messages.create(model=model_id, max_tokens=32, messages=PARIS, extra_body=GREEDY)
    with claude.messages.stream(model=model_id, max_tokens=32, messages=PARIS, extra_body=GREEDY) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    strict_message(final)
    assert text == unary.content[0].text == final.content[0].text
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == unary.usage.output_tokens


def _tool_use(message: Message):
    [block] = [b for b in message.content if b.type == "tool_use"]
    return block


def test_create_tool_use_and_result_round_trip(claude, model_id):
    asked = dict(model=model_id, max_tokens=64, system=TOOL_SYSTEM, tools=[WEATHER_TOOL], extra_body=GREEDY)
    message = claude.messages.create(messages=WEATHER, **asked)
    strict_message(message)
    assert message.stop_reason == "tool_use"
    call = _tool_use(message)
    assert call.name == "get_weather" and call.input == {"city": "Paris"} and call.id
    # The SDK's own objects go back as the assistant turn, followed by the tool's result.
    follow_up = [
        *WEATHER,
        {"role": "assistant", "content": message.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18 degrees, sunny"}]},
    ]
    answer = claude.messages.create(messages=follow_up, **asked)
    strict_message(answer)
    assert answer.content and answer.stop_reason in ("end_turn", "tool_use", "max_tokens")


def test_stream_helper_tool_use(claude, model_id):
    asked = dict(model=model_id, max_tokens=64, system=TOOL_SYSTEM, tools=[WEATHER_TOOL], extra_body=GREEDY)
    unary = claude.messages.create(messages=WEATHER, **asked)
    with claude.messages.stream(messages=WEATHER, **asked) as stream:
        events = list(stream)
        final = stream.get_final_message()
    strict_message(final)
    assert final.stop_reason == "tool_use"
    assert _tool_use(final).input == _tool_use(unary).input == {"city": "Paris"}
    assert _tool_use(final).id and _tool_use(final).name == "get_weather"
    partial = "".join(e.delta.partial_json for e in events if e.type == "content_block_delta")
    assert json.loads(partial) == {"city": "Paris"}
    raw = list(claude.messages.create(messages=WEATHER, stream=True, **asked))
    kinds = strict_events(raw)
    assert [e.content_block.type for e in raw if e.type == "content_block_start"] == ["tool_use"]
    assert {e.delta.type for e in raw if e.type == "content_block_delta"} == {"input_json_delta"}
    assert raw[kinds.index("message_delta")].delta.stop_reason == "tool_use"


def test_refusals_are_anthropic_errors(claude, model_id):
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model=model_id, max_tokens=8, messages=[{"role": "user", "content": [image]}])
    body = caught.value.body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    # The google.rpc details under a name of their own: the SDKs read `error.details` as their own object.
    assert "details" not in body["error"] and body["error"]["status_details"][0]["reason"] == "INVALID_CONTENT"
    assert body["error"]["param"] == "messages[0].content[0]" and "image" in body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model=model_id, max_tokens=8, messages=PARIS, thinking={"type": "enabled", "budget_tokens": 2048}
        )
    assert caught.value.body["error"]["param"] == "thinking.budget_tokens"
    with pytest.raises(anthropic.NotFoundError) as caught:
        claude.messages.create(model="claude-opus-4-1", max_tokens=8, messages=PARIS)
    assert caught.value.body["type"] == "error" and caught.value.body["error"]["type"] == "not_found_error"


def test_extended_thinking_with_a_budget(claude, model_id):
    """`{"type": "enabled", "budget_tokens": N}` as Anthropic's docs use it; SmolLM2 does not reason, so the
    answer is text alone. Anthropic's bounds on the budget are kept (at least 1,024, below max_tokens)."""
    message = claude.messages.create(
        model=model_id,
        max_tokens=1100,
        messages=PARIS,
        thinking={"type": "enabled", "budget_tokens": 1024},
        extra_body=GREEDY,
    )
    assert [block.type for block in message.content] == ["text"] and "Paris" in message.content[0].text
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model=model_id, max_tokens=4096, messages=PARIS, thinking={"type": "enabled", "budget_tokens": 100}
        )
    assert caught.value.body["error"]["param"] == "thinking.budget_tokens"


class Capital(BaseModel):
    country: str
    capital: str


def test_structured_output_through_messages_parse(claude, model_id):
    """The SDK's `messages.parse(output_format=<a pydantic model>)` sends `output_config.format`; the answer is
    held to the schema while decoding, so the SDK's own parse succeeds whatever the small model would write."""
    message = claude.messages.parse(
        model=model_id, max_tokens=64, messages=PARIS, output_format=Capital, extra_body=GREEDY
    )
    assert isinstance(message.parsed_output, Capital) and message.stop_reason == "end_turn"
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model=model_id,
            max_tokens=8,
            messages=PARIS,
            output_config={"format": {"type": "json_schema", "schema": {"type": "no-such-type"}}},
        )
    assert caught.value.body["error"]["param"] == "output_config.format"  # the client's field, not the engine's


def test_render_route_speaks_anthropic_errors_too(claude, model_id):
    rendered = claude.post(
        "/v1/messages/render/typed", cast_to=object, body={"model": model_id, "max_tokens": 8, "messages": PARIS}
    )
    assert rendered["generate_request"]["token_ids"] and rendered["derender_context"]["id"].startswith("msg_")
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.post("/v1/messages/render/typed", cast_to=object, body={"model": model_id, "messages": PARIS})
    assert caught.value.body["error"]["param"] == "max_tokens"


def test_gateway_refusals_under_messages_are_anthropic_errors(stack):
    """Envoy's own replies (here: no route) are Anthropic's error object under /v1/messages, OpenAI's elsewhere."""
    answer = post(stack, "/v1/messages/unknown", {})
    assert answer.status_code == 404
    assert answer.json()["type"] == "error" and answer.json()["error"]["type"] == "not_found_error"
    assert answer.json()["error"]["code"].startswith("GATEWAY_")
    assert "type" not in post(stack, "/v1/unknown", {}).json()


def test_a_forced_tool_is_called_without_any_prompting(claude, model_id):
    """tool_choice any / tool is enforced by the engine's grammar: the call comes even with no tool prompt, and
    stops with `tool_use` (a named tool too, though the chat form ends it with "stop"), unary and streamed."""
    for choice in ({"type": "any"}, {"type": "tool", "name": "get_weather"}):
        asked = dict(model=model_id, max_tokens=64, messages=PARIS, tools=[WEATHER_TOOL], tool_choice=choice)
        message = claude.messages.create(**asked, extra_body=GREEDY)
        strict_message(message)
        call = _tool_use(message)
        assert call.name == "get_weather" and isinstance(call.input.get("city"), str), choice
        assert message.stop_reason == "tool_use", choice
        raw = list(claude.messages.create(**asked, stream=True, extra_body=GREEDY))
        kinds = strict_events(raw)
        assert raw[kinds.index("message_delta")].delta.stop_reason == "tool_use", choice


def test_eager_input_streaming_is_how_calls_stream(claude, model_id):
    """`eager_input_streaming: true` on a tool (the Vercel AI SDK sends it on every streamed request with tools)
    is accepted: a call's input streams as derender emits it (token by token under a named tool_choice, whole
    per call where a tool parser reads it). `false` (buffer the input) is refused, naming it."""
    eager = {**WEATHER_TOOL, "eager_input_streaming": True}
    named = {"type": "tool", "name": "get_weather"}
    for choice, pieces in ((named, range(2, 64)), ({"type": "any"}, [1])):
        asked = dict(model=model_id, max_tokens=64, messages=PARIS, tool_choice=choice, extra_body=GREEDY)
        raw = list(claude.messages.create(tools=[eager], stream=True, **asked))
        kinds = strict_events(raw)
        partial = [e.delta.partial_json for e in raw if e.type == "content_block_delta"]
        assert len(partial) in pieces and isinstance(json.loads("".join(partial)).get("city"), str), choice
        assert raw[kinds.index("message_delta")].delta.stop_reason == "tool_use", choice
    asked = dict(model=model_id, max_tokens=64, messages=PARIS, extra_body=GREEDY)
    buffered = {**WEATHER_TOOL, "eager_input_streaming": False}
    error = _error(lambda: claude.messages.create(tools=[buffered], **asked))
    assert (error["code"], error["param"]) == ("UNSUPPORTED_FIELD", "tools[0].eager_input_streaming")


def _error(call) -> dict:
    with pytest.raises(anthropic.BadRequestError) as caught:
        call()
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    return body["error"]


def test_context_overflow_in_anthropics_words(stack, claude, model_id):
    """The two context-limit errors word for word as Anthropic writes them: Claude Code parses the first to retry
    with a smaller max_tokens, and clients match "prompt is too long" to compact the conversation."""
    counted = post(stack, "/tokenize", {"model": model_id, "messages": PARIS}).json()
    prompt, limit = counted["count"], counted["max_model_len"]
    error = _error(lambda: claude.messages.create(model=model_id, max_tokens=100000, messages=PARIS))
    assert error["code"] == "MAX_TOKENS_TOO_LARGE" and error["param"] == "max_tokens"
    assert error["message"] == (
        f"input length and `max_tokens` exceed context limit: {prompt} + 100000 > {limit}, "
        "decrease input length or `max_tokens` and try again"
    )
    # Claude Code's own pattern, with the numbers it shrinks max_tokens by
    found = re.search(r"input length and `max_tokens` exceed context limit: (\d+) \+ (\d+) > (\d+)", error["message"])
    assert found and [int(n) for n in found.groups()] == [prompt, 100000, limit]
    long = [{"role": "user", "content": "hello " * 9000}]
    prompt = post(stack, "/tokenize", {"model": model_id, "messages": long}).json()["count"]
    error = _error(lambda: claude.messages.create(model=model_id, max_tokens=5, messages=long))
    assert error["code"] == "PROMPT_TOO_LONG" and error["param"] == "messages"
    assert error["message"] == f"prompt is too long: {prompt} tokens > {limit} maximum"


def test_an_empty_user_turn_is_refused(claude, model_id):
    """Anthropic refuses a message with no content (only a final assistant turn may be empty); an empty last user
    turn is not dropped, which would turn the request into a continuation of the assistant's text."""
    history = [*PARIS, {"role": "assistant", "content": "The capital of France"}]
    for empty in ([], [{"type": "text", "text": ""}], ""):
        messages = [*history, {"role": "user", "content": empty}]
        error = _error(lambda: claude.messages.create(model=model_id, max_tokens=8, messages=messages))
        assert error["code"] == "INVALID_REQUEST" and error["param"] == "messages[2].content", empty
    error = _error(
        lambda: claude.messages.create(model=model_id, max_tokens=8, messages=[{"role": "user", "content": []}])
    )
    assert error["param"] == "messages[0].content"
