"""MeetKai Functionary's two tool-call formats, as llama.cpp reads them (its chat.cpp / test-chat.cpp):

- `functionary_v3_1` (Functionary v3.1, Llama 3.1 based): `<function=f>{"a": 1}</function>`, repeated, after
  text; `<|python_tag|>` then code to the end of the output is a call of `python` with `{"code": ...}`.
- `functionary_v3_2` (Functionary v3.2): the output is segments `recipient\\nbody` joined by `>>>`: recipient
  `all` makes the body content, any other word a call of that function with the body its JSON arguments
  (`python` takes raw code as `{"code": ...}`). An output whose first line is no recipient is content up to the
  first `>>>`.
A call whose body is not a JSON object is shown as text, exactly as written."""

from __future__ import annotations

import re

from derender_svc.parsers.arguments import dumps, emit, loads
from derender_svc.parsers.base import StatefulParser, ToolCallDelta
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.scan import split_markers

PYTHON_TAG, SEP = "<|python_tag|>", ">>>"
_NAMED = re.compile(r"(\w+)>(.*)$", re.DOTALL)
_WORD = re.compile(r"\w*")


def _call(name: str, body: str) -> Call | None:
    """`name`'s call with JSON-object arguments `body` (`python`: raw code too), or None."""
    if name == "python" and not body.lstrip().startswith("{"):
        args = dumps({"code": body}) if body.strip() else None
    else:
        value = loads(body.strip())
        args = dumps(value) if isinstance(value, dict) else None
    return None if args is None else (name, args)


class FunctionaryV31ToolParser(BlockToolParser):
    CALLS = (("<function=", ("</function>",)), (PYTHON_TAG, ()))
    TRACK = "json"

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        if opener == PYTHON_TAG:
            call = _call("python", body) if body.strip()[:1] != "{" else None
        else:
            named = _NAMED.match(body)
            call = _call(*named.groups()) if named else None
        return None if call is None else [call]


class FunctionaryV32ToolParser(StatefulParser):
    markers = (SEP,)
    tools: tuple = ()  # the request's tools; not state
    streamed = False  # every call here ends with the output or at `>>>`: nothing to drop; not state

    @classmethod
    def initial_state(cls) -> dict:
        # mode: head (reading a recipient) | content | call; first: no `>>>` yet
        return {"held": "", "mode": "head", "first": True, "name": "", "body": "", "quote": False, "escape": False,
                "calls": 0}  # fmt: skip

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        text, self.held = self.held + text, ""
        content: list[str] = []
        deltas: list[ToolCallDelta] = []
        while text or (final and self.mode == "call"):
            if self.mode == "head":
                match = _WORD.match(text)
                word = match.group(0) if match else ""
                rest = text[len(word) :]
                if not rest and not final:
                    self.held = text
                    break
                if word and rest.startswith("\n"):
                    text, self.name, self.body = rest[1:], word, ""
                    self.mode = "content" if word == "all" else "call"
                    self.quote = self.escape = False
                    continue
                content.append("" if self.first else SEP)
                self.mode = "content"
            elif self.mode == "content":
                before, marker, text = split_markers(text, (SEP,), final)
                content.append(before)
                if marker is None:
                    self.held = text
                    break
                self.mode, self.first = "head", False
            else:
                end = self._end(text)
                if end is None and not final:
                    cut = len(text) - next((n for n in (2, 1) if text.endswith(SEP[:n])), 0)
                    self.body, self.held = self.body + text[:cut], text[cut:]
                    break
                self.body += text if end is None else text[:end]
                text = "" if end is None else text[end + len(SEP) :]
                call = _call(self.name, self.body)
                if call is None:
                    content.append(("" if self.first else SEP) + f"{self.name}\n{self.body}")
                else:
                    deltas += emit(self.calls, call)
                    self.calls += 1
                self.mode, self.first, self.body = "head", False, ""
                if end is None:
                    break
        if final:
            content.append(self.held)
            self.held = ""
        return "".join(content), deltas

    def _end(self, text: str) -> int | None:
        """Where `>>>` ends the call's body in `text` (outside a JSON string; `python` code is not scanned for
        strings), updating the string state."""
        strings = self.name != "python"
        for at, ch in enumerate(text):
            if self.quote:
                self.escape, self.quote = (False, True) if self.escape else (ch == "\\", ch != '"')
            elif ch == '"' and strings:
                self.quote = True
            elif text.startswith(SEP, at):
                return at
        return None
