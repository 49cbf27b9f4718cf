"""tool_choice "required": the output is a JSON array of {"name": ..., "parameters": {...}} objects, the form
render constrains it to (vLLM's). Each object becomes a call as soon as it closes (name, then its whole
arguments); what follows the array is dropped. An output that does not open with `[{` (a caller that did not
constrain it; pythonic calls open with `[name(`) goes to the model's own tool parser (`fallback`). An object a
length cut leaves open is still a call once its name is whole, with its arguments so far (not valid JSON), as
OpenAI returns a cut call and as a named tool_choice's cut arguments read; an output cut before any name is
content, as every parser treats text that is not a valid call."""

from __future__ import annotations

import re

from derender_svc.parsers.arguments import call_from_object, emit, loads
from derender_svc.parsers.base import StatefulParser, ToolCallDelta

# The head of an object the constraint writes: its whole name, then (once written) the arguments key.
_HEAD = re.compile(r'\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"(?P<key>\s*,\s*"(?:parameters|arguments)"\s*:\s*)?')


class RequiredToolParser(StatefulParser):
    fallback: str  # the model's tool parser ("" or "none": none)
    mode: str  # start | array | native
    raw: str  # the output so far, until a call completes (content if none does)
    item: str  # the current object's text
    depth: int  # nesting inside the current object (0: between objects)
    string: bool
    escape: bool
    calls: int
    inner: dict | None  # the fallback parser's state

    @classmethod
    def initial_state(cls) -> dict:
        return {
            "fallback": "",
            "mode": "start",
            "raw": "",
            "item": "",
            "depth": 0,
            "string": False,
            "escape": False,
            "calls": 0,
            "inner": None,
        }

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        if self.mode == "start":
            self.raw += text
            head = self.raw.lstrip()
            inside = head[1:].lstrip() if head.startswith("[") else None
            if not final and (not head or inside == ""):
                return "", []
            self.mode = "array" if inside is not None and inside.startswith("{") else "native"
            text, self.raw = self.raw, "" if self.mode == "native" else self.raw
        elif self.mode == "array" and not self.calls:
            self.raw += text
        if self.mode == "native":
            return self._native(text, final)
        deltas = self._scan(text)
        if final and self.depth:
            deltas += self._cut_call()
        if final and not self.calls:
            return self.raw, deltas
        return "", deltas

    def _cut_call(self) -> list[ToolCallDelta]:
        """The object a length cut left open: its name and its arguments so far, or nothing before a whole name."""
        head = _HEAD.match(self.item)
        name = loads(f'"{head.group(1)}"') if head is not None else None
        if head is None or not isinstance(name, str) or not name:
            return []
        arguments = self.item[head.end() :] if head.group("key") else ""
        self.calls += 1
        return [ToolCallDelta(self.calls - 1, name=name), ToolCallDelta(self.calls - 1, arguments=arguments)]

    def _native(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        if self.fallback in ("", "none"):
            return text, []
        from derender_svc.parsers import make_tool_parser  # the registry imports this module

        inner = make_tool_parser(self.fallback, self.inner, tools=getattr(self, "tools", ()), model=self.model)
        content, deltas = inner.feed(text, final)
        self.inner = inner.state()
        return content, deltas

    def _scan(self, text: str) -> list[ToolCallDelta]:
        deltas: list[ToolCallDelta] = []
        for char in text:
            if self.depth == 0:
                if char == "{":
                    self.depth, self.item = 1, "{"
                continue
            self.item += char
            if self.string:
                if self.escape:
                    self.escape = False
                elif char == "\\":
                    self.escape = True
                elif char == '"':
                    self.string = False
            elif char == '"':
                self.string = True
            elif char in "{[":
                self.depth += 1
            elif char in "}]":
                self.depth -= 1
                if self.depth == 0:
                    call = call_from_object(loads(self.item))
                    if call is not None:
                        deltas += emit(self.calls, call)
                        self.calls += 1
                        self.raw = ""
                    self.item = ""
        return deltas
