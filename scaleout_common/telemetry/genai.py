"""The gen_ai.* vocabulary and the reader registry: how a service tells telemetry what its messages mean.

The generic machinery (call_summary, rpc) knows no service's messages. Each service registers, from its own
package, one reader per message type its RPCs take or return:

    @genai.on_request(engine_pb2.GenerateRequest)
    def _request(msg: engine_pb2.GenerateRequest, call: genai.GenAiCall) -> None:
        call.set_attributes(genai.attributes(operation="generate", input_tokens=len(msg.token_ids)))

A request reader sees a call's unary request, or each message of its request stream; a response reader sees
each response message. Readers say what they found through `GenAiCall` (attributes, tokens, prompt size,
usage, finish reasons, the response id); the call's summary owns the counting and the timing (TTFT,
inter-token latency) and writes the span and the LLM metrics. One reader per type and direction in a
process: registering a different one for a taken type raises, the same function again is a no-op (two
services served in one process may share a reader, as they share openai_shapes').
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from google.protobuf.message import Message
from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from scaleout.v1 import common_pb2

# Keyword -> attribute name, for `attributes()` and `set_genai_attributes()`.
NAMES = {
    "operation": "gen_ai.operation.name",
    "request_model": "gen_ai.request.model",
    "max_tokens": "gen_ai.request.max_tokens",
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "seed": "gen_ai.request.seed",
    "choice_count": "gen_ai.request.choice.count",
    "input_messages": "gen_ai.input.messages",
    "response_model": "gen_ai.response.model",
    "response_id": "gen_ai.response.id",
    "finish_reasons": "gen_ai.response.finish_reasons",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "output_messages": "gen_ai.output.messages",
}
SAMPLING_KNOBS = ("max_tokens", "temperature", "top_p", "seed")  # SamplingParams fields named in NAMES


def attributes(**values: AttributeValue | None) -> dict[str, AttributeValue]:
    """gen_ai.* attributes by keyword (NAMES): attributes(operation="chat", max_tokens=16). None values are left out."""
    return {NAMES[key]: list(v) if isinstance(v, tuple) else v for key, v in values.items() if v is not None}


def sampling_attributes(params: common_pb2.SamplingParams) -> dict[str, AttributeValue]:
    """gen_ai.request.* of the contract's sampling parameters: those set."""
    return {NAMES[knob]: getattr(params, knob) for knob in SAMPLING_KNOBS if params.HasField(knob)}


def set_genai_attributes(**values: AttributeValue | None) -> None:
    """Set gen_ai.* attributes on the current span, for custom code: set_genai_attributes(request_model="m").

    Keys as `attributes()` (NAMES); None values are skipped; a no-op without a recording span.
    """
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(attributes(**values))


class GenAiCall(Protocol):
    """What a reader may tell the call it reads for (call_summary.CallSummary implements it)."""

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        """gen_ai.* attributes for the call's span; a later value for the same key wins."""
        ...

    def generated(self, new_tokens: Sequence[int]) -> None:
        """Engine output arrived now, `new_tokens` per choice: counted, the LLM metrics apply to this call, and on
        a streamed call it is timed (the first token gives TTFT, later ones inter-token latency)."""
        ...

    def passed(self, tokens: int) -> None:
        """Output tokens seen passing through (derender's input): counted, not timed."""
        ...

    def prompt_tokens(self, count: int) -> None:
        """The prompt's size in tokens."""
        ...

    def usage(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Totals a message reports; they win over what was counted."""
        ...

    def finished(self, index: int, reason: str) -> None:
        """Choice `index` finished for `reason`, as clients name it (finish_reasons.openai_name)."""
        ...

    def response_id(self, response_id: str) -> None:
        """The response's id; the first non-empty one wins."""
        ...


M = TypeVar("M", bound=Message)
Reader = Callable[[M, GenAiCall], None]

_requests: dict[type[Message], Callable[[Any, GenAiCall], None]] = {}
_responses: dict[type[Message], Callable[[Any, GenAiCall], None]] = {}


def _registrar(table: dict[type[Message], Callable[[Any, GenAiCall], None]], direction: str, kind: type[M]):
    def register(reader: Reader[M]) -> Reader[M]:
        taken = table.setdefault(kind, reader)
        if taken is not reader:
            raise ValueError(
                f"{kind.DESCRIPTOR.full_name} already has a {direction} reader: {taken.__module__}.{taken.__qualname__}"
            )
        return reader

    return register


def on_request(kind: type[M]) -> Callable[[Reader[M]], Reader[M]]:
    """Register a reader of `kind` as a request (a unary request, or each message of a request stream)."""
    return _registrar(_requests, "request", kind)


def on_response(kind: type[M]) -> Callable[[Reader[M]], Reader[M]]:
    """Register a reader of `kind` as a response (each message of a unary or streamed response)."""
    return _registrar(_responses, "response", kind)


def read_request(message: Message, call: GenAiCall) -> None:
    reader = _requests.get(type(message))
    if reader is not None:
        reader(message, call)


def read_response(message: Message, call: GenAiCall) -> None:
    reader = _responses.get(type(message))
    if reader is not None:
        reader(message, call)
