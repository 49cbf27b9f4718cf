"""Reasoning in a `<think>…</think>` block at the start of the output (or already opened by the prompt)."""

from __future__ import annotations

from derender_svc.holdback import split_at_marker
from derender_svc.parsers.base import StatefulParser

START, END = "<think>", "</think>"


class ThinkReasoningParser(StatefulParser):
    markers = (START, END)

    @classmethod
    def initial_state(cls) -> dict:
        return {"mode": "start", "held": ""}  # mode: start | reasoning | content

    @classmethod
    def create(cls, reasoning_started: bool) -> ThinkReasoningParser:
        return cls(mode="reasoning" if reasoning_started else "start")

    def feed(self, text: str, final: bool) -> tuple[str, str]:
        """(reasoning, content) made safe to show by `text`."""
        text, self.held = self.held + text, ""
        reasoning = ""
        if self.mode == "start":
            opening = text.lstrip()
            if opening.startswith(START):
                self.mode, text = "reasoning", opening[len(START) :]
            elif START.startswith(opening) and not final:
                self.held = text
                return "", ""
            else:
                self.mode = "content"
        if self.mode == "reasoning":
            reasoning, marker, text = split_at_marker(text, END)
            if marker is None:
                if final:
                    return reasoning + text, ""
                self.held = text
                return reasoning, ""
            self.mode = "content"
        return reasoning, text
