"""Mistral tool calls, both formats: text, then `[TOOL_CALLS]` and a JSON list of
`{"name": ..., "arguments": {...}}` objects (v3), or `[TOOL_CALLS]name[ARGS]{...}` once per call (v11+), also
as `[TOOL_CALLS]name{...}` (the text vLLM's tests use: `[ARGS]` skipped as a special token).

On the block engine (`block.py`): the character after the marker picks the format; a v11 name (one word) is
read up to `[ARGS]` or `{` before the JSON scan starts, so the brackets of `[ARGS]` are not counted. An empty
list (or a bare marker at the end) is no call and no text, as in vLLM."""

from __future__ import annotations

from derender_svc.parsers.arguments import arguments_json, loads
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.hermes import json_calls
from derender_svc.parsers.scan import split_markers

MARKER, ARGS = "[TOOL_CALLS]", "[ARGS]"


class MistralToolParser(BlockToolParser):
    CALLS = ((MARKER, ()),)
    TRACK = "json"
    VALUE_ENDS = True

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "v11": None, "named": False}  # v11: None until the format shows

    @property
    def markers(self) -> tuple[str, ...]:
        return (MARKER, ARGS)

    def _open(self, marker: str) -> None:
        super()._open(marker)
        self.v11, self.named = None, False

    def can_call(self, body: str) -> bool | None:
        if self.v11:
            value = _split(body)[1]
            return value.lstrip()[0] in "{[" if value.strip() else None
        return super().can_call(body)

    def _call(self, text, final, content, deltas):
        if self.v11 is None:
            rest = text.lstrip()
            if not rest and not final:
                self.held = text
                return "", False
            self.v11 = bool(rest) and rest[0] not in "[{"
        if self.v11 and not self.named:
            name, marker, text = split_markers(text, (ARGS, "{"), final)
            self.body += name
            if marker is None and not final:
                self.held = text
                return "", False
            if marker is None or len(self.body.split()) != 1:  # no arguments, or prose: not a call
                content.append(MARKER + self.body + (marker or "") + text)
                self.mode, self.body, self.v11 = "text", "", None
                return "", True
            if marker == "{":
                text = marker + text
            else:
                self.body += ARGS
            self.named = True
        return super()._call(text, final, content, deltas)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        if not self.v11:
            value = loads(body.strip()) if body.strip() else []
            return [] if value == [] else json_calls(body) if closed else None
        name, value = _split(body)
        args = arguments_json(loads(value.strip())) if value.strip() else "{}"
        return [(name.strip(), args)] if name.strip() and args is not None and (closed or not value.strip()) else None


def _split(body: str) -> tuple[str, str]:
    """A v11 body's name and its arguments text (after `[ARGS]`, or from the `{` when it was skipped)."""
    name, args, value = body.partition(ARGS)
    return (name, value) if args else (body[: body.index("{")], body[body.index("{") :])
