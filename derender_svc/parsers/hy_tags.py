"""Hunyuan HY-V3/V4 checkpoints may suffix their structural tags (`<tool_calls:6124c78e>`, `</think:6124c78e>`; vLLM
reads the suffix from the vocabulary). Derender's parsers see text, so the suffix is dropped from those tags
before parsing; a tail that may still grow into one is held back, so every chunking reads the same."""

from __future__ import annotations

import re

from derender_svc.parsers.think import DeepSeekR1ReasoningParser, ThinkReasoningParser

_NAMES = ("think", "tool_calls", "tool_call", "tool_sep", "arg_key", "arg_value")
_SUFFIXED = re.compile(r"<(/?)(" + "|".join(_NAMES) + r"):[^\s<>]+>")
_OPEN = re.compile(r"</?([a-z_]*)(:[^\s<>]*)?")  # what a suffixed tag looks like before its `>`


def _undecided(text: str) -> int:
    """Where a trailing fragment that may still become a suffixed tag starts (len(text) when none)."""
    at = text.rfind("<")
    match = _OPEN.fullmatch(text, at) if at >= 0 else None
    if match is None:
        return len(text)
    name, suffix = match.groups()
    viable = any(n == name for n in _NAMES) if suffix is not None else any(n.startswith(name) for n in _NAMES)
    return at if viable else len(text)


class Unsuffixed:
    """Mixin: a parser that reads HY tags with their checkpoint suffix dropped."""

    tag = ""  # state: the held tail

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "tag": ""}  # type: ignore[misc]

    def feed(self, text: str, final: bool):
        text = self.tag + text
        cut = len(text) if final else _undecided(text)
        text, self.tag = text[:cut], text[cut:]
        return super().feed(_SUFFIXED.sub(r"<\1\2>", text), final)  # type: ignore[misc]


class HyV3ReasoningParser(Unsuffixed, ThinkReasoningParser):
    """HY-V3 (`hy_v3`): `<think>` when the prompt or the output opens it (vLLM: content unless the request sets a
    reasoning effort)."""


class HyV4ReasoningParser(Unsuffixed, DeepSeekR1ReasoningParser):
    """HY-V4 (`hy_v4`): reasoning from the start until `</think>` (vLLM: unless the request turns it off)."""
