"""Readers for messages shaped like OpenAI's API, for each service whose messages have that shape.

The GenAI semantic conventions are written against OpenAI's shapes: a chat request's model, max tokens,
temperature, top_p, seed and n; an answer's id, model, per-choice finish_reason and usage. More than one
service serves them (the chat request is render's and the one-hop pipeline's; the chat completion and its
chunks are derender's and the pipeline's, which imports no service package), so each mapping is written
once, here, against the shape: the Protocols below, which pyright checks where a service registers a reader
for its own message type. Nothing here imports a service's messages. Message text (gen_ai.input.messages,
gen_ai.output.messages) only when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Protocol

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from scaleout_common.telemetry import genai
from scaleout_common.telemetry.tracing import capture_content


class _Fields(Protocol):
    def HasField(self, field_name: str) -> bool: ...


class ChatRequest(_Fields, Protocol):
    """OpenAI's chat request with vLLM's fields (`max_completion_tokens` wins over `max_tokens`)."""

    @property
    def model(self) -> str: ...
    @property
    def messages(self) -> Iterable[Message]: ...
    @property
    def max_completion_tokens(self) -> int: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def temperature(self) -> float: ...
    @property
    def top_p(self) -> float: ...
    @property
    def seed(self) -> int: ...
    @property
    def n(self) -> int: ...


class _Usage(Protocol):
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...


class _Choice(Protocol):
    @property
    def index(self) -> int: ...
    @property
    def finish_reason(self) -> str: ...


class Answer(_Fields, Protocol):
    """A chat completion, a completion, or a chunk of either."""

    @property
    def id(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def choices(self) -> Iterable[_Choice]: ...
    @property
    def usage(self) -> _Usage: ...


class _ChatChoice(_Choice, Protocol):
    @property
    def message(self) -> Message: ...


class ChatAnswer(Answer, Protocol):
    """A whole chat completion: its choices carry messages."""

    @property
    def choices(self) -> Iterable[_ChatChoice]: ...


def _json(messages: Iterable[Message]) -> str:
    return json.dumps([MessageToDict(m) for m in messages], ensure_ascii=False)


def chat_request(msg: ChatRequest, call: genai.GenAiCall) -> None:
    """The knobs the client asked for (gen_ai.request.*), the conversation when capture is on."""
    max_tokens = (
        msg.max_completion_tokens
        if msg.HasField("max_completion_tokens")
        else (msg.max_tokens if msg.HasField("max_tokens") else None)
    )
    call.set_attributes(
        genai.attributes(
            operation="chat",
            input_messages=_json(msg.messages) if capture_content() else None,
            request_model=msg.model or None,
            max_tokens=max_tokens,
            temperature=msg.temperature if msg.HasField("temperature") else None,
            top_p=msg.top_p if msg.HasField("top_p") else None,
            seed=msg.seed if msg.HasField("seed") else None,
            choice_count=msg.n if msg.HasField("n") else None,
        )
    )


def answer(msg: Answer, call: genai.GenAiCall) -> None:
    """Id, model, the finish reason of each choice that finished, usage when the message carries it."""
    call.response_id(msg.id)
    if msg.model:
        call.set_attributes(genai.attributes(response_model=msg.model))
    for choice in msg.choices:
        if choice.finish_reason:
            call.finished(choice.index, choice.finish_reason)
    if msg.HasField("usage"):
        call.usage(msg.usage.prompt_tokens, msg.usage.completion_tokens)


def chat_answer(msg: ChatAnswer, call: genai.GenAiCall) -> None:
    """`answer`, plus the answer's messages when capture is on."""
    answer(msg, call)
    if capture_content():
        call.set_attributes(genai.attributes(output_messages=_json(c.message for c in msg.choices)))
