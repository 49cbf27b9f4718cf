"""tool_choice naming one function: the whole output is that function's arguments."""

from __future__ import annotations

from derender_svc.parsers.base import StatefulParser, ToolCallDelta


class NamedToolParser(StatefulParser):
    @classmethod
    def initial_state(cls) -> dict:
        return {"function": "", "named": False}

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        deltas = []
        if not self.named and (text or final):
            self.named = True
            deltas.append(ToolCallDelta(0, name=self.function))
        if text:
            deltas.append(ToolCallDelta(0, arguments=text))
        return "", deltas
