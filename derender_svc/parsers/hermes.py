"""Hermes / Qwen tool calls: text with `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks."""

from __future__ import annotations

from derender_svc.holdback import split_at_marker
from derender_svc.parsers.base import StatefulParser, ToolCallDelta
from derender_svc.parsers.json_call import JsonCallScanner

OPEN, CLOSE = "<tool_call>", "</tool_call>"


class HermesToolParser(StatefulParser):
    markers = (OPEN, CLOSE)

    @classmethod
    def initial_state(cls) -> dict:
        # call: the open block's scanner state; gap: right after a call, where whitespace is dropped
        return {"held": "", "calls": 0, "call": None, "gap": False}

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        """(content, tool call deltas) made safe to show by `text`."""
        text, self.held = self.held + text, ""
        content, deltas = [], []
        while True:
            if self.call is None:
                if self.gap:  # whitespace between (or after) calls is not content
                    rest = text.lstrip()
                    if OPEN.startswith(rest) and not final:
                        self.held = text
                        break
                    if rest.startswith(OPEN) or not rest:
                        text = rest
                    self.gap = False
                before, marker, text = split_at_marker(text, OPEN)
                content.append(before)
                if marker is None:
                    if final:
                        content.append(text)
                    else:
                        self.held = text
                    break
                self.call = JsonCallScanner().state()
            else:
                scanner = JsonCallScanner(**self.call)
                inside, marker, text = split_at_marker(text, CLOSE)
                new, _ = scanner.feed(inside, self.calls)
                deltas += new
                if marker is None and not final:
                    self.held, self.call = text, scanner.state()
                    break
                content.append(self._close(scanner, deltas, marker or text))
                self.call = None
                if marker is None:
                    break
        return "".join(content), deltas

    def _close(self, scanner: JsonCallScanner, deltas: list[ToolCallDelta], closing: str) -> str:
        """Finish the block; one that never named a function is shown as text."""
        if scanner.name is None:
            return OPEN + scanner.raw + closing
        deltas += scanner.finish(self.calls)
        self.calls += 1
        self.gap = True
        return ""
