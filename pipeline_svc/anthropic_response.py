"""Anthropic's Messages JSON from derender's typed chat output: a Message, or its server-sent events.

The content comes from the same parsed output the chat routes serve: reasoning -> a `thinking` block, content
-> a `text` block, each tool call -> a `tool_use` block (`input` the parsed arguments; streamed as
`input_json_delta`). stop_reason follows scaleout_common.finish_reasons (a matched stop string is
`stop_sequence`, named in `stop_sequence`). Usage is Anthropic's split: `input_tokens` are the prompt tokens
not read from the prefix cache, `cache_read_input_tokens` those that were; streamed, `message_start` has it from
the engine's first output (`counted`), `message_delta` from the final usage.

Streamed, a block opens when its kind of output first arrives and closes when another kind starts (as vLLM
converts a chat stream): `message_start`, then `content_block_start` / `content_block_delta` /
`content_block_stop` per block, `message_delta` (stop_reason, stop_sequence, usage) and `message_stop`.
Thinking blocks carry an empty `signature`: this deployment signs nothing and checks nothing it gets back.
With `return_token_ids` (our extension, vLLM's chat field) the Message has `prompt_token_ids` and `token_ids`;
streamed, the prompt's on `message_start`'s message and the sampled ids on `message_delta`.
"""

from __future__ import annotations

import json
from typing import Any

from pipeline_svc.shaped_route import Event
from scaleout.v1 import common_pb2, derender_pb2, engine_pb2, render_pb2
from scaleout_common import finish_reasons
from scaleout_common.errors import ServiceError
from scaleout_common.openai_errors import anthropic_error_object


def usage(prompt_tokens: int, cached_tokens: int = 0, output_tokens: int = 0) -> dict:
    return {
        "input_tokens": prompt_tokens - cached_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached_tokens,
    }


def total_usage(total: common_pb2.Usage) -> dict:
    return usage(total.prompt_tokens, total.cached_tokens, total.completion_tokens)


def tool_input(arguments: str) -> dict:
    """A tool call's arguments as Anthropic's `input` object (derender hands on only whole, valid calls)."""
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _stop(choice, called: bool) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence) of a finished choice; `called`: its output has tool calls."""
    stop_sequence = choice.stop_str if choice.WhichOneof("stop_reason") == "stop_str" else None
    reason = finish_reasons.from_openai_name(choice.finish_reason)
    if called and reason == common_pb2.FINISH_REASON_STOP and stop_sequence is None:
        # A named tool_choice ends in "stop" (vLLM's convention); Anthropic says `tool_use` whenever a tool is called.
        reason = common_pb2.FINISH_REASON_TOOL_CALLS
    name = finish_reasons.anthropic_name(reason, stop_sequence)
    return name, stop_sequence if name == finish_reasons.ANTHROPIC_STOP_SEQUENCE else None


def message(completion: derender_pb2.ChatCompletion, rendered=None, request: dict | None = None) -> dict:
    """The Message of a whole (unary) answer."""
    choice = completion.choices[0]
    answer = choice.message
    content: list[dict] = []
    if answer.HasField("reasoning") and answer.reasoning:
        content.append({"type": "thinking", "thinking": answer.reasoning, "signature": ""})
    if answer.HasField("content") and answer.content:
        content.append({"type": "text", "text": answer.content})
    for call in answer.tool_calls:
        content.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.function.name,
                "input": tool_input(call.function.arguments),
            }
        )
    stop_reason, stop_sequence = _stop(choice, bool(answer.tool_calls))
    out = {
        "id": completion.id,
        "type": "message",
        "role": "assistant",
        "model": completion.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": total_usage(completion.usage) if completion.HasField("usage") else usage(0),
    }
    if rendered is not None and rendered.derender_context.return_token_ids:
        out |= {"prompt_token_ids": list(completion.prompt_token_ids), "token_ids": list(choice.token_ids)}
    return out


class MessageStream:
    """Anthropic's events for one streamed answer, fed derender's chunks in order."""

    def __init__(self, rendered: render_pb2.RenderChatResponse, request: dict | None = None):
        ctx = rendered.derender_context
        self.id, self.model = ctx.id, ctx.model
        self.prompt = engine_pb2.PromptInfo(num_tokens=ctx.num_prompt_tokens)  # until `counted`
        self.index = -1  # the open block's index; -1: none yet
        self.kind: str | None = None  # the open block's type
        self.tool_blocks: dict[int, int] = {}  # tool call index -> its block index
        self.stop: tuple[str, str | None] = ("end_turn", None)
        self.usage: common_pb2.Usage | None = None
        # with return_token_ids: the prompt's ids (on message_start) and the sampled ids (on message_delta)
        self.prompt_token_ids = list(ctx.prompt_token_ids) if ctx.return_token_ids else None
        self.token_ids: list[int] = []

    def counted(self, prompt: engine_pb2.PromptInfo) -> None:
        """The prompt as the engine counted it (shaped_route.CountsPrompt): message_start's input usage."""
        self.prompt = prompt

    def _input_usage(self) -> dict:
        return usage(self.prompt.num_tokens, self.prompt.cached_tokens)

    def start(self) -> list[Event]:
        head = {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": []}
        head |= {"stop_reason": None, "stop_sequence": None, "usage": self._input_usage()}
        if self.prompt_token_ids is not None:
            head["prompt_token_ids"] = self.prompt_token_ids
        return [("message_start", {"type": "message_start", "message": head})]

    def _open(self, block: dict) -> list[Event]:
        events = self._close()
        self.index += 1
        self.kind = block["type"]
        return events + [
            ("content_block_start", {"type": "content_block_start", "index": self.index, "content_block": block})
        ]

    def _close(self) -> list[Event]:
        if self.kind is None:
            return []
        self.kind = None
        return [("content_block_stop", {"type": "content_block_stop", "index": self.index})]

    def _delta(self, index: int, delta: dict) -> Event:
        return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}

    def chunk(self, chunk: derender_pb2.ChatCompletionChunk) -> list[Event]:
        if chunk.HasField("usage"):
            self.usage = chunk.usage
        events: list[Event] = []
        for choice in chunk.choices[:1]:  # Anthropic has one answer (n is never set)
            self.token_ids += choice.token_ids
            delta = choice.delta
            if delta.HasField("reasoning") and delta.reasoning:
                if self.kind != "thinking":
                    events += self._open({"type": "thinking", "thinking": "", "signature": ""})
                events.append(self._delta(self.index, {"type": "thinking_delta", "thinking": delta.reasoning}))
            if delta.HasField("content") and delta.content:
                if self.kind != "text":
                    events += self._open({"type": "text", "text": ""})
                events.append(self._delta(self.index, {"type": "text_delta", "text": delta.content}))
            for call in delta.tool_calls:
                if call.HasField("id") or call.index not in self.tool_blocks:
                    block: dict[str, Any] = {"type": "tool_use", "id": call.id, "name": call.function.name, "input": {}}
                    events += self._open(block)
                    self.tool_blocks[call.index] = self.index
                if call.function.arguments:
                    partial = {"type": "input_json_delta", "partial_json": call.function.arguments}
                    events.append(self._delta(self.tool_blocks[call.index], partial))
            if choice.HasField("finish_reason"):
                self.stop = _stop(choice, bool(self.tool_blocks))
        return events

    def finish(self) -> list[Event]:
        stop_reason, stop_sequence = self.stop
        delta = {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence}}
        delta["usage"] = total_usage(self.usage) if self.usage is not None else self._input_usage()
        if self.prompt_token_ids is not None:
            delta["token_ids"] = self.token_ids
        return self._close() + [("message_delta", delta), ("message_stop", {"type": "message_stop"})]

    def error(self, failure: ServiceError) -> list[Event]:
        return [("error", anthropic_error_object(failure))]
