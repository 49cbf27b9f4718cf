"""The one map from the contract's FinishReason to the names clients read.

OpenAI spells them `stop`, `length`, `tool_calls` (vLLM adds `abort` and `error`); Anthropic's `stop_reason`
is `end_turn`, `stop_sequence`, `max_tokens` or `tool_use`. Derender builds responses from this map and
telemetry reports `gen_ai.response.finish_reasons` from it, so the two never disagree.
"""

from __future__ import annotations

from scaleout.v1 import common_pb2

OPENAI: dict[int, str] = {
    common_pb2.FINISH_REASON_STOP: "stop",
    common_pb2.FINISH_REASON_LENGTH: "length",
    common_pb2.FINISH_REASON_ABORT: "abort",
    common_pb2.FINISH_REASON_TOOL_CALLS: "tool_calls",
    common_pb2.FINISH_REASON_ERROR: "error",
}


def openai_name(reason: int) -> str:
    """FINISH_REASON_LENGTH -> "length"; an unset reason reads as "stop", as vLLM reports an ended choice."""
    return OPENAI.get(reason, "stop")


# Anthropic's `stop_reason`. A matched stop string is `stop_sequence` (the response names it); an aborted
# choice (the caller went away) reads as `end_turn`, the only neutral name Anthropic has.
ANTHROPIC: dict[int, str] = {
    common_pb2.FINISH_REASON_STOP: "end_turn",
    common_pb2.FINISH_REASON_LENGTH: "max_tokens",
    common_pb2.FINISH_REASON_ABORT: "end_turn",
    common_pb2.FINISH_REASON_TOOL_CALLS: "tool_use",
}
ANTHROPIC_STOP_SEQUENCE = "stop_sequence"
# The Responses API's `status` of a finished response, and its `incomplete_details.reason` when incomplete.
RESPONSES_STATUS: dict[int, tuple[str, str | None]] = {
    common_pb2.FINISH_REASON_STOP: ("completed", None),
    common_pb2.FINISH_REASON_TOOL_CALLS: ("completed", None),
    common_pb2.FINISH_REASON_LENGTH: ("incomplete", "max_output_tokens"),
    common_pb2.FINISH_REASON_ABORT: ("cancelled", None),
    common_pb2.FINISH_REASON_ERROR: ("failed", None),
}
_FROM_OPENAI = {name: reason for reason, name in OPENAI.items()}


def from_openai_name(name: str) -> int:
    """ "length" -> FINISH_REASON_LENGTH (derender's responses carry the OpenAI name); "" reads as stop."""
    return _FROM_OPENAI.get(name or "stop", common_pb2.FINISH_REASON_STOP)


def anthropic_name(reason: int, stop_sequence: str | None = None) -> str:
    """Anthropic's stop_reason: `stop_sequence` when a stop string matched, else the map's name."""
    if stop_sequence is not None and reason == common_pb2.FINISH_REASON_STOP:
        return ANTHROPIC_STOP_SEQUENCE
    return ANTHROPIC.get(reason, "end_turn")


def responses_status(reason: int) -> tuple[str, str | None]:
    """(status, incomplete_details.reason) of a Response that finished for `reason`."""
    return RESPONSES_STATUS.get(reason, ("completed", None))
