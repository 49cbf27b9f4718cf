"""The one map from the contract's FinishReason to the names clients read.

OpenAI spells them `stop`, `length`, `tool_calls` (vLLM adds `abort` and `error`); Anthropic's `stop_reason`
is `end_turn`, `stop_sequence`, `max_tokens` or `tool_use`. Derender builds responses from this map and
telemetry reports `gen_ai.response.finish_reasons` from it, so the two never disagree.
"""

from __future__ import annotations

from scaleout.v1 import common_pb2

OPENAI = {
    common_pb2.FINISH_REASON_STOP: "stop",
    common_pb2.FINISH_REASON_LENGTH: "length",
    common_pb2.FINISH_REASON_ABORT: "abort",
    common_pb2.FINISH_REASON_TOOL_CALLS: "tool_calls",
    common_pb2.FINISH_REASON_ERROR: "error",
}


def openai_name(reason: int) -> str:
    """FINISH_REASON_LENGTH -> "length"; an unset reason reads as "stop", as vLLM reports an ended choice."""
    return OPENAI.get(reason, "stop")
