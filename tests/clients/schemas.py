"""Strict validation of what the gateway sent, with the SDK's own pydantic models.

`model_dump()` of an SDK object gives back the JSON as the server sent it (the SDK builds its objects without
validating them), so a wrong type or a missing required field fails here even where the SDK let it through.
"""

from __future__ import annotations

from typing import Literal, TypeVar

from openai.types import Completion, CompletionChoice
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def strict(model: type[M], obj: BaseModel) -> M:
    return model.model_validate(obj.model_dump(), strict=True)


class StreamedCompletionChoice(CompletionChoice):
    # OpenAI and vLLM send `"finish_reason": null` on a streamed choice until it ends; the SDK's Completion type
    # (shared by unary and streamed completions) has no None, so mid-stream chunks validate against this one,
    # identical but for that, and every choice's last chunk also against the SDK's own Completion.
    finish_reason: Literal["stop", "length", "content_filter"] | None  # type: ignore[assignment]


class StreamedCompletion(Completion):
    choices: list[StreamedCompletionChoice]  # type: ignore[assignment]


def strict_completion_chunk(chunk: Completion) -> None:
    strict(StreamedCompletion, chunk)
    if all(choice.finish_reason is not None for choice in chunk.choices):
        strict(Completion, chunk)
