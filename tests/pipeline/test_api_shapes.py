"""Anthropic's Message and the Responses API's Response, unary and streamed, shaped from derender's typed chat
output (the fast tier: hand-built ChatCompletion / ChatCompletionChunk, no model). Reasoning, text and tool calls
in every order the parsers emit them; each object and event validated with the official SDKs' models (strict),
and every stream folded back equal to the unary answer of the same output."""

from __future__ import annotations

import json

import grpc
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from google.protobuf import json_format
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from pipeline_svc import anthropic_response, responses_response
from pipeline_svc.shaped_route import sse
from scaleout.v1 import derender_pb2, render_pb2
from scaleout_common import finish_reasons
from scaleout_common.errors import ServiceError

USAGE = {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52, "cached_tokens": 32}
CALL_ID = "call_0123456789abcdef01234567"
ARGS = '{"city": "Paris", "days": 2}'
ANTHROPIC_EVENT = TypeAdapter(RawMessageStreamEvent)
RESPONSES_EVENT = TypeAdapter(ResponseStreamEvent)


def _rendered(prefix: str, **sampling) -> render_pb2.RenderChatResponse:
    return json_format.ParseDict(
        {
            "generate_request": {"request_id": f"{prefix}abc", "sampling_params": {"max_tokens": 64, **sampling}},
            "derender_context": {"id": f"{prefix}abc", "created": 1700000000, "model": "smol", "num_prompt_tokens": 40},
        },
        render_pb2.RenderChatResponse(),
    )


# Streamed deltas of one answer: (reasoning, content, tool call pieces), then the finish.
STREAMS = {
    "text": [{"content": "The capital"}, {"content": " is Paris."}],
    "reasoning_then_text": [{"reasoning": "User asks"}, {"reasoning": " a capital."}, {"content": "Paris."}],
    "tool_call": [
        {"tool_calls": [{"index": 0, "id": CALL_ID, "type": "function", "function": {"name": "get_weather"}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris", "days": 2}'}}]},
    ],
    "reasoning_text_and_two_calls": [
        {"reasoning": "Two cities."},
        {"content": "Checking both."},
        {
            "tool_calls": [
                {"index": 0, "id": CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}
            ]
        },
        {
            "tool_calls": [
                {"index": 1, "id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
            ]
        },
    ],
}
FINISH = {
    "text": "stop",
    "reasoning_then_text": "stop",
    "tool_call": "tool_calls",
    "reasoning_text_and_two_calls": "tool_calls",
}


def _chunks(prefix: str, name: str, stop_str: str | None = None) -> list[derender_pb2.ChatCompletionChunk]:
    head = {"id": f"{prefix}abc", "object": "chat.completion.chunk", "created": 1700000000, "model": "smol"}
    chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", **STREAMS[name][0]}}]}]
    chunks += [{**head, "choices": [{"index": 0, "delta": delta}]} for delta in STREAMS[name][1:]]
    last = {"index": 0, "delta": {}, "finish_reason": FINISH[name]}
    if stop_str:
        last |= {"finish_reason": "stop", "stop_str": stop_str}
    chunks += [{**head, "choices": [last]}, {**head, "choices": [], "usage": USAGE}]
    return [json_format.ParseDict(c, derender_pb2.ChatCompletionChunk()) for c in chunks]


def _whole(prefix: str, name: str, stop_str: str | None = None) -> derender_pb2.ChatCompletion:
    """The unary ChatCompletion of the same output (the deltas joined, as derender's unary call gives it)."""
    message: dict = {"role": "assistant"}
    calls: dict[int, dict] = {}
    for delta in STREAMS[name]:
        for key in ("reasoning", "content"):
            if key in delta:
                message[key] = message.get(key, "") + delta[key]
        for call in delta.get("tool_calls", []):
            if "id" in call:  # a call's first delta
                function = {"name": call["function"]["name"], "arguments": ""}
                calls[call["index"]] = {"id": call["id"], "type": "function", "function": function}
            whole = calls[call["index"]]
            whole["function"]["arguments"] += call["function"].get("arguments", "")
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    choice = {"index": 0, "message": message, "finish_reason": FINISH[name]}
    if stop_str:
        choice |= {"finish_reason": "stop", "stop_str": stop_str}
    body = {
        "id": f"{prefix}abc",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "smol",
        "choices": [choice],
        "usage": USAGE,
    }
    return json_format.ParseDict(body, derender_pb2.ChatCompletion())


def _wire(events) -> list[tuple[str, dict]]:
    """The events as a client reads them off the wire (`event:` and `data:` lines)."""
    out = []
    for event in events:
        lines = sse(event).data.decode().split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: ") and lines[2:] == ["", ""]
        out.append((lines[0][len("event: ") :], json.loads(lines[1][len("data: ") :])))
    return out


# --- Anthropic -------------------------------------------------------------------------------------------------
def _anthropic_stream(name: str, stop_str: str | None = None) -> list[tuple[str, dict]]:
    shape = anthropic_response.MessageStream(_rendered("msg_"))
    events = shape.start()
    for chunk in _chunks("msg_", name, stop_str):
        events += shape.chunk(chunk)
    return _wire(events + shape.finish())


def _fold_anthropic(events: list[tuple[str, dict]]) -> dict:
    """A Message from its events, as the SDK's accumulator builds it."""
    message = None
    for name, data in events:
        ANTHROPIC_EVENT.validate_python(data, strict=True)
        assert name == data["type"]
        if name == "message_start":
            message = data["message"]
        elif name == "content_block_start":
            assert data["index"] == len(message["content"])
            message["content"].append(dict(data["content_block"]))
        elif name == "content_block_delta":
            block, delta = message["content"][data["index"]], data["delta"]
            key = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}[
                delta["type"]
            ]
            block[key] = block.get(key, "") + delta[key]
        elif name == "content_block_stop":
            block = message["content"][data["index"]]
            if block["type"] == "tool_use":
                block["input"] = json.loads(block.pop("partial_json", "{}"))
        elif name == "message_delta":
            message |= data["delta"]
            message["usage"] |= data["usage"]
    assert events[-1][0] == "message_stop"
    return message


@pytest.mark.parametrize("name", STREAMS)
def test_anthropic_stream_folds_to_the_unary_message(name):
    unary = anthropic_response.message(_whole("msg_", name))
    Message.model_validate(unary, strict=True)
    assert _fold_anthropic(_anthropic_stream(name)) == unary


def test_anthropic_message_blocks_and_usage():
    message = anthropic_response.message(_whole("msg_", "reasoning_text_and_two_calls"))
    assert [b["type"] for b in message["content"]] == ["thinking", "text", "tool_use", "tool_use"]
    assert message["content"][2] == {
        "type": "tool_use",
        "id": CALL_ID,
        "name": "get_weather",
        "input": {"city": "Paris", "days": 2},
    }
    assert message["stop_reason"] == "tool_use" and message["stop_sequence"] is None
    # Anthropic's split: input_tokens are the ones not read from the cache.
    assert message["usage"] == {
        "input_tokens": 8,
        "output_tokens": 12,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 32,
    }


def test_anthropic_stop_sequence():
    message = anthropic_response.message(_whole("msg_", "text", stop_str="\n\nHuman:"))
    assert (message["stop_reason"], message["stop_sequence"]) == ("stop_sequence", "\n\nHuman:")
    delta = next(data for name, data in _anthropic_stream("text", stop_str="\n\nHuman:") if name == "message_delta")
    assert delta["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "\n\nHuman:"}


def test_anthropic_blocks_switch_as_the_output_does():
    kinds = [(n, d.get("content_block", {}).get("type")) for n, d in _anthropic_stream("reasoning_text_and_two_calls")]
    starts = [kind for name, kind in kinds if name == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use", "tool_use"]
    assert sum(name == "content_block_stop" for name, _ in kinds) == 4


def test_anthropic_in_band_error():
    failure = ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "QUEUE_FULL", "the engine's queue is full")
    [(name, data)] = _wire(anthropic_response.MessageStream(_rendered("msg_")).error(failure))
    assert name == "error"
    assert data["type"] == "error" and data["error"]["type"] == "rate_limit_error"
    assert data["error"]["message"] == "the engine's queue is full" and data["error"]["code"] == "QUEUE_FULL"


# --- Responses -------------------------------------------------------------------------------------------------
REQUEST = {
    "input": "hi",
    "instructions": "Be brief.",
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    "metadata": {"k": "v"},
}


def _responses_stream(name: str, request: dict = REQUEST) -> list[tuple[str, dict]]:
    shape = responses_response.ResponseStream(_rendered("resp_", temperature=0.0), request)
    events = []
    for chunk in _chunks("resp_", name):
        events += shape.chunk(chunk)
    return _wire(shape.start() + events + shape.finish())


@pytest.mark.parametrize("name", STREAMS)
def test_responses_stream_events_and_final_response(name):
    events = _responses_stream(name)
    for number, (kind, data) in enumerate(events):
        RESPONSES_EVENT.validate_python(data, strict=True)
        assert kind == data["type"] and data["sequence_number"] == number
    unary = responses_response.response(_whole("resp_", name), _rendered("resp_", temperature=0.0), REQUEST)
    Response.model_validate(unary, strict=True)
    final = events[-1][1]["response"]
    assert events[-1][0] == "response.completed" and final == unary
    # Every item's deltas add up to the item the final response holds.
    for index, item in enumerate(final["output"]):
        text = "".join(d["delta"] for _, d in events if d.get("output_index") == index and d["type"].endswith(".delta"))
        want = {
            "message": lambda i: i["content"][0]["text"],
            "reasoning": lambda i: i["content"][0]["text"],
            "function_call": lambda i: i["arguments"],
        }
        assert text == want[item["type"]](item)
        added = next(
            d["item"] for _, d in events if d["type"] == "response.output_item.added" and d["output_index"] == index
        )
        assert added["id"] == item["id"] and added["status"] == "in_progress" and item["status"] == "completed"


def test_responses_output_items_and_echo():
    response = responses_response.response(
        _whole("resp_", "reasoning_text_and_two_calls"), _rendered("resp_", temperature=0.0), REQUEST
    )
    assert [i["type"] for i in response["output"]] == ["reasoning", "message", "function_call", "function_call"]
    call = response["output"][2]
    assert (call["call_id"], call["name"], call["arguments"]) == (CALL_ID, "get_weather", ARGS)
    assert len({i["id"] for i in response["output"]}) == 4
    assert (
        response["instructions"] == "Be brief."
        and response["tools"] == REQUEST["tools"]
        and response["metadata"] == {"k": "v"}
    )
    assert response["temperature"] == 0.0 and response["max_output_tokens"] == 64 and response["tool_choice"] == "auto"
    assert response["usage"]["input_tokens_details"]["cached_tokens"] == 32 and response["usage"]["total_tokens"] == 52


def test_responses_length_is_incomplete():
    whole = _whole("resp_", "text")
    whole.choices[0].finish_reason = "length"
    response = responses_response.response(whole, _rendered("resp_"), {"input": "hi"})
    assert response["status"] == "incomplete" and response["incomplete_details"] == {"reason": "max_output_tokens"}
    Response.model_validate(response, strict=True)


def test_responses_in_band_error():
    """`error` with the stable reason, then `response.failed` with the output so far (the open item incomplete)."""
    failure = ServiceError(grpc.StatusCode.INTERNAL, "ENGINE_STEP_FAILED", "a model step raised")
    shape = responses_response.ResponseStream(_rendered("resp_"), {"input": "hi"})
    events = shape.start()
    for chunk in _chunks("resp_", "reasoning_then_text")[:3]:  # the reasoning item, and the text item open
        events += shape.chunk(chunk)
    wire = _wire(events + shape.error(failure))
    for number, (kind, data) in enumerate(wire):
        RESPONSES_EVENT.validate_python(data, strict=True)
        assert kind == data["type"] and data["sequence_number"] == number
    (name, error), (last, failed) = wire[-2:]
    assert name == "error" and error["code"] == "ENGINE_STEP_FAILED" and error["message"] == "a model step raised"
    response = failed["response"]
    Response.model_validate(response, strict=True)
    assert last == "response.failed" and response["status"] == "failed"
    assert response["error"] == {"code": "server_error", "message": "a model step raised"}
    assert [(i["type"], i["status"]) for i in response["output"]] == [
        ("reasoning", "completed"),
        ("message", "incomplete"),
    ]
    assert response["output"][1]["content"][0]["text"] == "Paris."
    queue_full = ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "QUEUE_FULL", "the queue is full")
    fresh = responses_response.ResponseStream(_rendered("resp_"), {"input": "hi"})
    [_, (_, data)] = _wire(fresh.start()[:0] + fresh.error(queue_full))
    assert data["response"]["error"]["code"] == "rate_limit_exceeded" and data["response"]["output"] == []


def test_finish_reason_names():
    assert finish_reasons.anthropic_name(finish_reasons.from_openai_name("length")) == "max_tokens"
    assert finish_reasons.anthropic_name(finish_reasons.from_openai_name("tool_calls")) == "tool_use"
    assert finish_reasons.anthropic_name(finish_reasons.from_openai_name("stop")) == "end_turn"
    assert finish_reasons.anthropic_name(finish_reasons.from_openai_name("stop"), "END") == "stop_sequence"
    assert finish_reasons.responses_status(finish_reasons.from_openai_name("")) == ("completed", None)


def summarized_reasoning_events(deltas: int) -> list[str]:
    """A summarized reasoning item's events: the summary part beside the content part, each step summary first."""
    return [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.content_part.added",
        *["response.reasoning_summary_text.delta", "response.reasoning_text.delta"] * deltas,
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]


def test_responses_reasoning_summary_is_the_reasoning_whole():
    """`reasoning.summary` "auto": the reasoning item's summary is one summary_text part holding the reasoning (its
    content stays), streamed beside the content part in OpenAI's event order; without it the summary is []."""
    asked = {"input": "hi", "reasoning": {"summary": "auto"}}
    events = _responses_stream("reasoning_then_text", asked)
    for number, (kind, data) in enumerate(events):
        RESPONSES_EVENT.validate_python(data, strict=True)
        assert kind == data["type"] and data["sequence_number"] == number
    unary = responses_response.response(
        _whole("resp_", "reasoning_then_text"), _rendered("resp_", temperature=0.0), asked
    )
    Response.model_validate(unary, strict=True)
    assert events[-1][1]["response"] == unary
    reasoning = unary["output"][0]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "User asks a capital."}]
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "User asks a capital."}]
    assert unary["reasoning"] == {"summary": "auto"}  # echoed
    assert [kind for kind, data in events if data.get("output_index") == 0] == summarized_reasoning_events(2)
    summary = [d for _, d in events if d["type"] == "response.reasoning_summary_text.delta"]
    assert "".join(d["delta"] for d in summary) == "User asks a capital." and {d["summary_index"] for d in summary} == {
        0
    }
    plain = responses_response.response(_whole("resp_", "reasoning_then_text"), _rendered("resp_"), {"input": "hi"})
    assert plain["output"][0]["summary"] == []
    assert not any("summary" in kind for kind, _ in _responses_stream("reasoning_then_text"))
