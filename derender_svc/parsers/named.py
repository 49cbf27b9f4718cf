"""tool_choice naming one function: the whole output is that function's arguments.

A model that wraps its answer in a hermes block anyway (`<tool_call>{"name": ..., "arguments": {...}}
</tool_call>`) gets the block parsed and its first call's arguments used, not the tag text; the name is
always the requested function's."""

from __future__ import annotations

from derender_svc.parsers.base import StatefulParser, ToolCallDelta
from derender_svc.parsers.hermes import OPEN, HermesToolParser
from derender_svc.parsers.scan import opening


class NamedToolParser(StatefulParser):
    # state (see initial_state); set by StatefulParser.__init__
    function: str  # the requested function's name
    named: bool
    mode: str
    held: str
    inner: dict | None

    @classmethod
    def initial_state(cls) -> dict:
        # mode: start | raw | tagged (inner: the hermes parser's state)
        return {"function": "", "named": False, "mode": "start", "held": "", "inner": None}

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        if self.mode == "start":
            text, self.held = self.held + text, ""
            marker, decided = opening(text, (OPEN,), final)
            if not decided:
                self.held = text
                return "", []
            self.mode = "tagged" if marker is not None else "raw"
        if self.mode == "tagged":
            inner = HermesToolParser(**(self.inner or {}))
            content, calls = inner.feed(text, final)
            self.inner = inner.state()
            deltas = [ToolCallDelta(0, self.function if d.name else None, d.arguments) for d in calls if d.index == 0]
            return content, deltas
        deltas = []
        if not self.named and (text or final):
            self.named = True
            deltas.append(ToolCallDelta(0, name=self.function))
        if text:
            deltas.append(ToolCallDelta(0, arguments=text))
        return "", deltas
