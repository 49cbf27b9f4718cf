"""llama.cpp's generic format (`COMMON_CHAT_FORMAT_GENERIC`: for templates with no tool syntax of their own,
llama.cpp asks for it in a system message and constrains the output to it): the whole output is one JSON object,
`{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}`, `{"tool_call": {...}}` or `{"response": ...}` (the
answer: a string as it is, another value as JSON indented by 2), looked for in that order. An output that does not
start with `{` is content as it streams; one that does is held to the end and read whole, and one that is none of
the three (not JSON, text after it, a call without a name) is content, as llama.cpp falls back to."""

from __future__ import annotations

import json

from derender_svc.parsers.arguments import call_from_object, emit, loads
from derender_svc.parsers.base import StatefulParser, ToolCallDelta


class GenericToolParser(StatefulParser):
    mode: str  # start | json | text
    held: str

    @classmethod
    def initial_state(cls) -> dict:
        return {"mode": "start", "held": ""}

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        if self.mode == "text":
            return text, []
        text, self.held = self.held + text, ""
        if self.mode == "start":
            if not text.strip() and not final:
                self.held = text
                return "", []
            self.mode = "json" if text.lstrip().startswith("{") else "text"
            if self.mode == "text":
                return text, []
        if not final:
            self.held = text
            return "", []
        read = _read(text)
        if read is None:
            return text, []
        content, calls = read
        return content, [delta for i, call in enumerate(calls) for delta in emit(i, call)]


def _read(text: str) -> tuple[str, list] | None:
    """(content, calls) of the whole output, or None when it is not one of the three shapes."""
    value = loads(text)
    if not isinstance(value, dict):
        return None
    if "tool_calls" in value or "tool_call" in value:
        objects = value["tool_calls"] if "tool_calls" in value else [value["tool_call"]]
        calls = [call_from_object(obj) for obj in objects] if isinstance(objects, list) else [None]
        return None if None in calls else ("", calls)
    if "response" in value:
        response = value["response"]
        return response if isinstance(response, str) else json.dumps(response, indent=2, ensure_ascii=False), []
    return None
