"""More families of the `think.py` policy (vLLM 0.33's additions); each class says how it differs.

`holo2` (Holo2: DeepSeek-R1's forced `<think>`) is an alias in the registry only; Hunyuan's HY-V3/V4 are in
`hy_tags.py`.
"""

from __future__ import annotations

from derender_svc.parsers.newlines import recover
from derender_svc.parsers.scan import split_markers
from derender_svc.parsers.think import (
    DeepSeekR1ReasoningParser,
    HunyuanReasoningParser,
    Qwen3ReasoningParser,
)


class GraniteThinkingReasoningParser(Qwen3ReasoningParser):
    """Granite 4.2 thinking (`granite_thinking_parser`): Nemotron-3's `<think>` with the newlines the template
    writes after `</think>` dropped from the start of the content."""

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "lead": True}

    def content(self, text: str, final: bool) -> str:
        if self.lead:
            text = text.lstrip("\n")
            self.lead = not text
        return text


class K2HorizonReasoningParser(DeepSeekR1ReasoningParser):
    """K2 Horizon (`k2_horizon`): `<ifm|think>…</ifm|think>` (the `_fast` / `_faster` pairs at lower reasoning
    efforts), open from the start; its tool-call group ends it."""

    START = ("<ifm|think>", "<ifm|think_fast>", "<ifm|think_faster>")
    END = ("</ifm|think>", "</ifm|think_fast>", "</ifm|think_faster>")
    ENDS_ON = ("<ifm|tool_calls>",)


class Plamo3ReasoningParser(DeepSeekR1ReasoningParser):
    """PLaMo 3 (`plamo3`): `<|plamo:begin_think:plamo|>…<|plamo:end_think:plamo|>`, open from the start; its
    tool requests, or the end-of-turn tag, end it."""

    START, END = ("<|plamo:begin_think:plamo|>",), ("<|plamo:end_think:plamo|>", "<|plamo:tag|>")
    ENDS_ON = ("<|plamo:begin_tool_requests:plamo|>",)


class CohereCommand3ReasoningParser(HunyuanReasoningParser):
    """Cohere Command A (`cohere_command3`): `<|START_THINKING|>…<|END_THINKING|>` then the answer in
    `<|START_RESPONSE|>…<|END_RESPONSE|>` (the wrapper is not content) or the calls in `<|START_ACTION|>`."""

    START, END = ("<|START_THINKING|>",), ("<|END_THINKING|>",)
    ENDS_ON = ("<|START_ACTION|>",)
    ANSWER = (("<|START_RESPONSE|>",), ("<|END_RESPONSE|>",))


class CohereCommand4ReasoningParser(CohereCommand3ReasoningParser):
    """Command A Reasoning / Command 4 (`cohere_command4`): the same, reasoning from the start (vLLM's cmd4 preset),
    and the answer may be wrapped in `<|START_TEXT|>…<|END_TEXT|>` too."""

    ANSWER = (("<|START_RESPONSE|>", "<|START_TEXT|>"), ("<|END_RESPONSE|>", "<|END_TEXT|>"))
    FORCED = True


class MiniCPMVReasoningParser(Qwen3ReasoningParser):
    """MiniCPM-V 4.x (`minicpmv`): Qwen3's `<think>` and `<tool_call>`, `<|im_end|>` and the reserved marker
    tokens dropped, and the escaped newlines its tokenizer writes repaired (`newlines.py`)."""

    DROP = ("<|im_end|>", *(f"<reserved_{i}>" for i in range(12, 16)), *(f"<|reserved_{i}|>" for i in range(12, 16)))

    @classmethod
    def initial_state(cls) -> dict:
        # dropped: a tail that may be a dropped marker; r*/c*: the reasoning's and the content's repair state
        return {**super().initial_state(), "dropped": "", "rspan": "", "rheld": "", "cspan": "", "cheld": ""}

    @property
    def markers(self) -> tuple[str, ...]:
        return (*super().markers, *self.DROP)

    def feed(self, text: str, final: bool) -> tuple[str, str]:
        kept, rest = [], self.dropped + text
        while True:
            before, marker, rest = split_markers(rest, self.DROP, final)
            kept.append(before)
            if marker is None:
                break
        self.dropped = rest
        reasoning, content = super().feed("".join(kept), final)
        done = final or self.mode == "content"
        reasoning, self.rspan, self.rheld = recover(self.rheld + reasoning, self.rspan, done)
        content, self.cspan, self.cheld = recover(self.cheld + content, self.cspan, final)
        return reasoning, content
