"""Hermes / Qwen2.5 / Qwen3 tool calls: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks.

`</tool_call>` counts only outside JSON strings, so an argument may mention it. A block holding a JSON list
of call objects gives each. A block whose JSON does not parse, or names no function, is shown as text (vLLM
does the same); a block cut off by the end of the output still counts when its JSON is complete. `longcat`
(LongCat-Flash) writes the same blocks as `<longcat_tool_call>…</longcat_tool_call>`; `trinity` reads them with the
think tags around them dropped."""

from __future__ import annotations

from derender_svc.parsers.arguments import call_from_object, loads
from derender_svc.parsers.base import ToolCallDelta
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.scan import drop_tags

OPEN, CLOSE = "<tool_call>", "</tool_call>"


def json_calls(text: str, keyed: bool = False) -> list[Call] | None:
    """Calls of a JSON call object, or of a non-empty list of them; None unless every one is valid (`keyed`:
    see `call_from_object`)."""
    value = loads(text.strip())
    objects = value if isinstance(value, list) and value else [value]
    calls = [call_from_object(obj, keyed) for obj in objects]
    valid = [call for call in calls if call is not None]
    return valid if len(valid) == len(calls) else None


class HermesToolParser(BlockToolParser):
    CALLS = ((OPEN, (CLOSE,)),)
    TRACK = "json"

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        return json_calls(body)


class LongcatToolParser(HermesToolParser):
    CALLS = (("<longcat_tool_call>", ("</longcat_tool_call>",)),)


class TrinityToolParser(HermesToolParser):
    """Trinity (SGLang's `trinity`): hermes blocks, also inside `<think>`: the think tags are dropped from the text
    (their inner text kept) before the calls are read, as SGLang does."""

    THINK = ("<think>", "</think>")

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "carry": ""}  # a think tag split over chunks

    @property
    def markers(self) -> tuple[str, ...]:
        return (*super().markers, *self.THINK)

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        text, self.carry = drop_tags(self.carry + text, self.THINK, final)
        return super().feed(text, final)
