"""Pythonic tool calls: output that is a Python list of calls, `[f(a=1), g(b="x")]`.

Each call is parsed (with `ast`, literals only) as soon as its closing parenthesis arrives, so calls stream
one by one. Output that does not start with `[`, or whose first element is not a call, is plain content.
"""

from __future__ import annotations

import ast
import json

from derender_svc.parsers.base import StatefulParser, ToolCallDelta

_OPENERS, _CLOSERS = "([{", ")]}"


def parse_call(source: str) -> tuple[str, str] | None:
    """(name, JSON arguments) of `f(a=1, b="x")`, or None when it is not such a call."""
    try:
        node = ast.parse(source.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
            return None
        arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
        if len(arguments) != len(node.keywords):
            return None
        return node.func.id, json.dumps(arguments, ensure_ascii=False)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None


class PythonicToolParser(StatefulParser):
    @classmethod
    def initial_state(cls) -> dict:
        return {
            "mode": "start",  # start | calls | content
            "held": "",  # start: undecided leading text; calls: everything since `[` until a call is out
            "element": "",  # the list element being read
            "depth": 0,
            "quote": "",  # the open string's quote character
            "escape": False,
            "calls": 0,
        }

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        deltas: list[ToolCallDelta] = []
        if self.mode == "start":
            text, self.held = self.held + text, ""
            opening = text.lstrip()
            if not opening and not final:
                self.held = text
                return "", deltas
            if not opening.startswith("["):
                self.mode = "content"
                return text, deltas
            self.mode, self.depth, text = "calls", 1, opening[1:]
            self.held = "["
        if self.mode == "content":
            return text, deltas
        for used, ch in enumerate(text, 1):
            if self.calls == 0:
                self.held += ch
            if not self._step(ch, deltas):
                self.mode = "content"  # not a list of calls after all: show it all
                shown, self.held = self.held + text[used:], ""
                return shown, deltas
            if self.depth == 0:
                self.mode, self.held = "content", ""
                return text[used:], deltas
        if final and self.calls == 0:
            shown, self.held, self.mode = self.held, "", "content"
            return shown, deltas
        return "", deltas

    def _step(self, ch: str, deltas: list[ToolCallDelta]) -> bool:
        """Advance one character; False when the list turns out not to hold calls."""
        if self.quote:
            self.element += ch
            if self.escape:
                self.escape = False
            elif ch == "\\":
                self.escape = True
            elif ch == self.quote:
                self.quote = ""
            return True
        if ch in "'\"":
            self.quote = ch
        elif ch in _OPENERS:
            self.depth += 1
        elif ch in _CLOSERS:
            self.depth -= 1
        if (self.depth == 1 and ch in ",)") or self.depth == 0:
            element = self.element + (ch if ch == ")" else "")
            self.element = ""
            if element.strip():
                call = parse_call(element)
                if call is None:
                    return self.calls > 0  # a bad element after good calls is dropped
                deltas += [ToolCallDelta(self.calls, name=call[0]), ToolCallDelta(self.calls, arguments=call[1])]
                self.calls += 1
                self.held = ""
            return True
        self.element += ch
        return True
