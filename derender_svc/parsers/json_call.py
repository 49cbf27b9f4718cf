"""Incremental scanner for one JSON tool call object: {"name": "f", "arguments": {...}} ("parameters" too).

Fed text piece by piece, it names the call as soon as the name string is complete and streams the raw
arguments object as it arrives (arguments seen before the name wait for it). Work is proportional to the
text fed. Until the name is known it keeps the raw text, so a block that is not a call can be shown as text.
"""

from __future__ import annotations

import json

from derender_svc.parsers.base import StatefulParser, ToolCallDelta

_ARGUMENT_KEYS = ("arguments", "parameters")


class JsonCallScanner(StatefulParser):
    @classmethod
    def initial_state(cls) -> dict:
        return {
            "at": "pre",  # pre | key_or_end | key | colon | value_start | value | done | bad
            "raw": "",  # everything fed, kept until the name is known
            "token": "",  # the key being read, or the value being read when it cannot stream yet
            "key": "",
            "depth": 0,  # nesting inside the current value
            "in_str": False,
            "escape": False,
            "name": None,
            "args_out": False,  # some arguments were emitted
            "args_done": False,
            "streaming": False,  # the current value is the arguments object, emitted as it comes
            "waiting": "",  # complete arguments that arrived before the name
        }

    def feed(self, text: str, index: int) -> tuple[list[ToolCallDelta], int]:
        """(deltas for call `index`, characters consumed: less than len(text) once the object closed)."""
        out: list[str] = []
        named_before = self.name is not None
        consumed = 0
        for ch in text:
            if self.at in ("done", "bad"):
                break
            consumed += 1  # noqa: SIM113 (counts only the characters stepped)
            self._step(ch, out)
        if self.at == "bad":
            consumed = len(text)  # not a call: it keeps everything, to be shown as text
        if not named_before:
            self.raw += text[:consumed]
        deltas = []
        if self.name is not None:
            if not named_before:
                deltas.append(ToolCallDelta(index, name=self.name))
                self.raw = ""
            if out:
                self.args_out = True
                deltas.append(ToolCallDelta(index, arguments="".join(out)))
        return deltas, consumed

    def finish(self, index: int) -> list[ToolCallDelta]:
        """Close the call: empty arguments become "{}". Nothing when it never got a name (see `raw`)."""
        if self.name is not None and not self.args_out:
            self.args_out = True
            return [ToolCallDelta(index, arguments="{}")]
        return []

    def _step(self, ch: str, out: list[str]) -> None:
        at = self.at
        if at == "pre":
            if ch == "{":
                self.at = "key_or_end"
            elif not ch.isspace():
                self.at = "bad"
        elif at == "key_or_end":
            if ch == '"':
                self.at, self.token = "key", ""
            elif ch == "}":
                self.at = "done"
            elif not (ch.isspace() or ch == ","):
                self.at = "bad"
        elif at == "key":
            if self.escape:
                self.escape, self.token = False, self.token + ch
            elif ch == "\\":
                self.escape, self.token = True, self.token + ch
            elif ch == '"':
                self.key, self.at = _loads(f'"{self.token}"', ""), "colon"
            else:
                self.token += ch
        elif at == "colon":
            if ch == ":":
                self.at = "value_start"
            elif not ch.isspace():
                self.at = "bad"
        elif at == "value_start":
            if not ch.isspace():
                self.at, self.token, self.depth, self.in_str, self.escape = "value", "", 0, False, False
                self.streaming = self.key in _ARGUMENT_KEYS and ch in "{[" and not self.args_done
                self._value(ch, out)
        elif at == "value":
            self._value(ch, out)

    def _value(self, ch: str, out: list[str]) -> None:
        if not self.in_str and self.depth == 0 and ch in ",}" and self.token:
            self._end_value(out)  # a scalar ended just before this character
            self.at = "key_or_end"
            self._step(ch, out)
            return
        self._take(ch, out)
        if advance_nesting(self, ch) and self.depth == 0:
            self._end_value(out)

    def _take(self, ch: str, out: list[str]) -> None:
        if self.streaming and self.name is not None:
            out.append(ch)
        else:
            self.token += ch

    def _end_value(self, out: list[str]) -> None:
        value, self.token = self.token.strip(), ""
        self.at = "key_or_end"
        if self.key == "name" and self.name is None:
            name = _loads(value, None)
            self.name = name if isinstance(name, str) else None
            if self.name is not None and self.waiting:
                out.append(self.waiting)
                self.waiting = ""
        elif self.key in _ARGUMENT_KEYS and not self.args_done:
            self.args_done = True
            if not (self.streaming and self.name is not None):
                if not self.streaming:  # a JSON-encoded string (or a scalar): unwrap it
                    decoded = _loads(value, value)
                    value = decoded if isinstance(decoded, str) else json.dumps(decoded, ensure_ascii=False)
                if self.name is not None:
                    out.append(value)
                else:
                    self.waiting = value
        self.streaming = False


def advance_nesting(state, ch: str) -> bool:
    """Advance `state`'s depth, in_str and escape over one JSON character; True when it closed a string or a
    bracket (the value may be complete)."""
    if state.in_str:
        if state.escape:
            state.escape = False
        elif ch == "\\":
            state.escape = True
        elif ch == '"':
            state.in_str = False
            return True
    elif ch == '"':
        state.in_str = True
    elif ch in "{[":
        state.depth += 1
    elif ch in "}]":
        state.depth -= 1
        return True
    return False


def _loads(text: str, default):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return default


class CallListParser(StatefulParser):
    """A parser for output that is a run of JSON call objects (state: mode, calls, call = open object's state)."""

    def _close(self, scanner: JsonCallScanner, deltas: list[ToolCallDelta]) -> str:
        """Finish one object; if it never named a function, it and the rest are content."""
        self.call = None
        if scanner.name is None:
            self.mode = "content"
            return scanner.raw
        deltas += scanner.finish(self.calls)
        self.calls += 1
        return ""
