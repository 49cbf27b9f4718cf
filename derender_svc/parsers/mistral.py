"""Mistral tool calls: text, then `[TOOL_CALLS]` and a JSON list of `{"name": ..., "arguments": {...}}` objects."""

from __future__ import annotations

from derender_svc.holdback import split_at_marker
from derender_svc.parsers.base import ToolCallDelta
from derender_svc.parsers.json_call import CallListParser, JsonCallScanner

MARKER = "[TOOL_CALLS]"


class MistralToolParser(CallListParser):
    markers = (MARKER,)

    @classmethod
    def initial_state(cls) -> dict:
        # mode: lead (before the marker) | list (expecting `[`) | calls (inside the list) | content (the rest)
        return {"mode": "lead", "held": "", "calls": 0, "call": None}

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        text, self.held = self.held + text, ""
        content, deltas = [], []
        if self.mode == "lead":
            before, marker, text = split_at_marker(text, MARKER)
            content.append(before)
            if marker is None and not final:
                self.held = text
                return "".join(content), deltas
            self.mode = "list" if marker else "content"
        if self.mode == "list":
            text = text.lstrip()
            if text.startswith("["):
                self.mode, text = "calls", text[1:]
            elif text or final:
                self.mode = "content"  # a marker without a list: show what follows
        while self.mode == "calls" and text:
            if self.call is None:
                text = text.lstrip().lstrip(",").lstrip()
                if text.startswith("]"):
                    self.mode, text = "content", text[1:]
                    break
                if not text:
                    break
                self.call = JsonCallScanner().state()
            scanner = JsonCallScanner(**self.call)
            new, used = scanner.feed(text, self.calls)
            deltas += new
            text, self.call = text[used:], scanner.state()
            if scanner.at in ("done", "bad"):
                text = self._close(scanner, deltas) + text
        if final and self.call is not None:
            text = self._close(JsonCallScanner(**self.call), deltas) + text
        if self.mode == "content":
            content.append(text)
        return "".join(content), deltas
