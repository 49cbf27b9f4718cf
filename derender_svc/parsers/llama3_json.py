"""Llama-3 JSON tool calls: output that is `{"name": ..., "parameters": {...}}` objects (`;`-separated,
optionally after `<|python_tag|>`). Output that does not start with `{` is plain content."""

from __future__ import annotations

from derender_svc.parsers.base import ToolCallDelta
from derender_svc.parsers.json_call import CallListParser, JsonCallScanner

PYTHON_TAG = "<|python_tag|>"


class Llama3JsonToolParser(CallListParser):
    markers = (PYTHON_TAG,)

    @classmethod
    def initial_state(cls) -> dict:
        return {"mode": "start", "held": "", "calls": 0, "call": None}  # mode: start | calls | content

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        text, self.held = self.held + text, ""
        deltas: list[ToolCallDelta] = []
        if self.mode == "start":
            opening = text.lstrip()
            if opening.startswith(PYTHON_TAG):
                opening = opening[len(PYTHON_TAG) :].lstrip()
            if not final and (not opening or PYTHON_TAG.startswith(opening)):
                self.held = text
                return "", deltas
            self.mode = "calls" if opening.startswith("{") else "content"
            text = opening if self.mode == "calls" else text
        while self.mode == "calls" and text:
            if self.call is None:
                rest = text.lstrip().lstrip(";").lstrip()
                if not rest:
                    break
                if not rest.startswith("{"):
                    self.mode, text = "content", rest
                    break
                self.call, text = JsonCallScanner().state(), rest
            scanner = JsonCallScanner(**self.call)
            new, used = scanner.feed(text, self.calls)
            deltas += new
            text = text[used:]
            self.call = scanner.state()
            if scanner.at in ("done", "bad"):
                text = self._close(scanner, deltas) + text
        if self.mode == "calls" and final and self.call is not None:
            text = self._close(JsonCallScanner(**self.call), deltas) + text
        return (text if self.mode == "content" else ""), deltas
