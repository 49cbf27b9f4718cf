"""The client's JSON of the Anthropic Messages and OpenAI Responses APIs, read field by field on the way to the
chat form (RenderChatRequest): `anthropic_chat.py` and `responses_chat.py` convert each API as vLLM does.

Both APIs arrive as the client's JSON (google.api.HttpBody), so every key the client wrote is seen. Each one is
converted onto the chat request (render then treats it exactly as a chat request: same template, same tokens,
same sampling resolution), accepted where it changes nothing, or refused: UNSUPPORTED_FIELD (400) naming it.
`null` means "not given". Images, documents and other non-text content are INVALID_CONTENT, as in a chat
request. The same modules serve `/v1/messages/render`, `/v1/responses/render` and, through those RPCs, the
one-hop `/v1/messages` and `/v1/responses`, so each conversion has one owner.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format

from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError, quote
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

IMAGE_LIKE = ("image", "document", "input_image", "input_file", "input_audio", "image_url", "file", "audio")


def invalid(field: str, message: str) -> ServiceError:
    return fail(Reason.INVALID_REQUEST, f"`{field}` {message}", field)


def unsupported(field: str, why: str) -> ServiceError:
    return fail(Reason.UNSUPPORTED_FIELD, f"`{field}` {why}", field)


def not_text(field: str, kind: str) -> ServiceError:
    return fail(
        Reason.INVALID_CONTENT,
        f"unsupported content {quote(kind)}: this deployment serves a text-only model (no images, files or audio)",
        field,
    )


_TYPES: dict[Any, str] = {
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    list: "a list",
    dict: "an object",
}


def _is(value, kind) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind)


class Fields:
    """One JSON object of the request. Each key is taken (honoured), allowed (a no-op) or, at `done()`, refused."""

    def __init__(self, value, path: str):
        if not isinstance(value, dict):
            raise invalid(path, "must be an object")
        self.path = path
        self.items = {k: v for k, v in value.items() if v is not None}

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return key in self.items

    def take(self, key: str, *kinds, required: bool = False) -> Any:
        """The value of `key` (None when absent or null), checked to be one of `kinds`."""
        value = self.items.pop(key, None)
        if value is None:
            if required:
                raise invalid(self.name(key), "is required")
            return None
        if kinds and not any(_is(value, kind) for kind in kinds):
            raise invalid(self.name(key), "must be " + " or ".join(_TYPES[k] for k in kinds))
        return value

    def allow(self, key: str, *values, why: str = "is not supported by this deployment") -> None:
        """A no-op at `values` (any value when none are listed); any other value is refused with `why`."""
        if key not in self.items:
            return
        value = self.items.pop(key)
        if values and value not in values:
            raise unsupported(self.name(key), f"= {json.dumps(value)} {why}")

    def refuse(self, key: str, why: str) -> None:
        if key in self.items:
            raise unsupported(self.name(key), why)

    def done(self) -> None:
        for key in self.items:
            raise unsupported(self.name(key), "is not a field this API takes")


def only(body, names: tuple[str, ...]) -> dict:
    """The client's JSON `body` (HttpBody), refused when it has a field other than `names` (count routes take only
    what shapes the prompt)."""
    data = load_object(body.data)
    fields = Fields(data, "")
    for name in names:
        fields.take(name)
    fields.done()
    return data


def text_parts(value, field: str, part_types: tuple[str, ...]) -> list[str]:
    """The texts of a string or a list of text parts (`{"type": <one of part_types>, "text": ...}`)."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise invalid(field, "must be a string or a list of content blocks")
    texts = []
    for i, item in enumerate(value):
        part = Fields(item, f"{field}[{i}]")
        kind = part.take("type", str, required=True)
        if kind in IMAGE_LIKE:
            raise not_text(part.path, kind)
        if kind not in part_types:
            raise unsupported(part.name("type"), f"= {quote(kind)} is not supported here (text only)")
        texts.append(part.take("text", str, required=True))
        part.allow("cache_control")  # a prompt-caching hint: prefix caching is automatic here
        part.allow("annotations", [])
        part.allow("logprobs", [])
        part.allow("citations", [], why="(citations) are not supported")
        part.done()
    return texts


# --- the chat request they become ------------------------------------------------------------------------------
def typed(chat: dict) -> render_pb2.RenderChatRequest:
    try:
        return json_format.ParseDict(chat, render_pb2.RenderChatRequest())
    except json_format.ParseError as error:
        raise fail(Reason.INVALID_REQUEST, f"the request does not fit the API: {error}") from None


def renamed(error: ServiceError, names: dict[str, str]) -> ServiceError:
    """The chat render's error with its fields named as the client's API names them: a renamed field's dotted
    sub-fields too, and in the words, where they name it (quoted, or leading: "max_tokens must be ...")."""

    def rename(field: str) -> str:
        for ours, theirs in names.items():
            if field == ours or field.startswith(ours + "."):
                return theirs + field[len(ours) :]
        return field

    def reword(text: str) -> str:
        for ours, theirs in names.items():
            for quote_mark in ("'", "`"):
                text = text.replace(f"{quote_mark}{ours}{quote_mark}", f"{quote_mark}{theirs}{quote_mark}")
            if text.startswith(ours + " "):
                text = theirs + text[len(ours) :]
        return text

    error.message = reword(error.message)
    error.violations = [(rename(field), reword(description)) for field, description in error.violations]
    return error
