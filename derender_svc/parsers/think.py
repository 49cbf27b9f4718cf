"""Reasoning between a start and an end tag at the start of the output (`<think>…</think>` and its kin).

One policy, parametrised per family:
- the block is open from the first token when the prompt opened it (`reasoning_started`, from render) or the
  family always reasons first (`FORCED`: DeepSeek-R1, MiniMax-M2, Step3 -- vLLM and SGLang assume it too, so
  an output with no tags at all is reasoning); a start tag the model repeats there is dropped;
- otherwise a start tag after leading whitespace opens it, and anything else makes the whole output content;
- the first end tag closes it; `ENDS_ON` tags, the family's tool-call opener (Qwen3's, GLM's and Step-3.5's
  `<tool_call>`, Kimi-K2's section, Hunyuan's `<tool_calls>`, MiniMax-M2's `<minimax:tool_call>`, Magistral's
  `[TOOL_CALLS]`, Seed-OSS's `<seed:tool_call>`, DeepSeek-V4's DSML section), close it too and stay in the
  content for the tool parser, since a call is never reasoning (vLLM's and SGLang's `tool_start_token`); an
  output that ends inside the block is all reasoning.
Tags are tuples: the longest one matching at a place wins (`<think>\\n` before `<think>`).
"""

from __future__ import annotations

from derender_svc.parsers.base import StatefulParser
from derender_svc.parsers.scan import drop_tags, opening, split_markers


class ThinkReasoningParser(StatefulParser):
    START: tuple[str, ...] = ("<think>",)
    END: tuple[str, ...] = ("</think>",)
    ENDS_ON: tuple[str, ...] = ()
    FORCED = False

    @classmethod
    def initial_state(cls) -> dict:
        return {"mode": "start", "held": ""}  # mode: start | open | reasoning | content

    @classmethod
    def create(cls, reasoning_started: bool, forced: bool | None = None) -> ThinkReasoningParser:
        """`forced` overrides the family's FORCED (the request turned its thinking off: nonempty.unforced)."""
        return cls(mode="open" if reasoning_started or (cls.FORCED if forced is None else forced) else "start")

    @property
    def markers(self) -> tuple[str, ...]:
        return (*self.START, *self.END, *self.ENDS_ON)

    @property
    def openers(self) -> tuple[str, ...]:
        """What opens the block at the start of the output (the start tags; a family may add to them)."""
        return self.START

    def feed(self, text: str, final: bool) -> tuple[str, str]:
        """(reasoning, content) made safe to show by `text`."""
        text, self.held = self.held + text, ""
        reasoning = ""
        if self.mode in ("start", "open"):
            marker, decided = opening(text, self.openers, final)
            if not decided:
                self.held = text
                return "", ""
            if marker is not None:
                text = text.lstrip()[len(marker) :]
            self.mode = "reasoning" if marker is not None or self.mode == "open" else "content"
        if self.mode == "reasoning":
            reasoning, marker, text = split_markers(text, self.END + self.ENDS_ON, final)
            if marker is None:
                self.held = text
                return reasoning, ""
            self.mode = "content"
            if marker in self.ENDS_ON:
                text = marker + text
        return reasoning, self.content(text, final)

    def content(self, text: str, final: bool) -> str:
        """The text after the block (a family may unwrap it)."""
        return text

    def in_block(self) -> bool:
        """The output so far ends inside the reasoning block."""
        return self.mode == "reasoning"


class Qwen3ReasoningParser(ThinkReasoningParser):
    """Qwen3, and every `<think>` family whose calls open with `<tool_call>` (GLM-4.5+, Nemotron 3)."""

    ENDS_ON = ("<tool_call>",)


class Qwen3ThinkingReasoningParser(Qwen3ReasoningParser):
    """Qwen3 thinking-only models (SGLang's `qwen3-thinking`): the template opens the block, so it is forced."""

    FORCED = True


class KimiK2ReasoningParser(ThinkReasoningParser):
    ENDS_ON = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")


class DeepSeekR1ReasoningParser(ThinkReasoningParser):
    FORCED = True


class MiniMaxM2ReasoningParser(DeepSeekR1ReasoningParser):
    ENDS_ON = ("<minimax:tool_call>",)


class Step3p5ReasoningParser(DeepSeekR1ReasoningParser):
    ENDS_ON = ("<tool_call>",)


class DeepSeekV4ReasoningParser(DeepSeekR1ReasoningParser):
    """DeepSeek-V4: thinking unless the prompt turned it off (vLLM's default), its DSML section ends it."""

    ENDS_ON = ("<｜DSML｜tool_calls>", "<｜DSML｜toolcalls>", "<｜DSML｜tool>")


class DeepSeekV41ReasoningParser(DeepSeekR1ReasoningParser):
    ENDS_ON = ("<｜DSML｜ calls>",)


class KimiReasoningParser(ThinkReasoningParser):
    """Kimi-VL-Thinking / Kimi-k1.5: `◁think▷…◁/think▷`."""

    START, END = ("◁think▷",), ("◁/think▷",)


class GemmaReasoningParser(ThinkReasoningParser):
    """Gemma-3-based thinkers (MedGemma 27B): `<unused94>thought\\n…<unused95>`."""

    START = ("<unused94>thought\n", "<unused94>thought", "<unused94>")
    END = ("<unused95>",)


class Gemma4ReasoningParser(ThinkReasoningParser):
    """Gemma 4 (its chat template): the thought channel, `<|channel>thought\n…<channel|>`; the `thought` label is
    not reasoning (vLLM and SGLang strip it), an output that starts with the bare label opens the channel too (vLLM),
    and `<|tool_call>` ends it like `</think>`'s kin."""

    START = ("<|channel>thought\n", "<|channel>thought", "<|channel>")
    END = ("<channel|>",)
    ENDS_ON = ("<|tool_call>",)

    @property
    def openers(self) -> tuple[str, ...]:
        # the bare label opens it only here, at the output's start: not a tag render may look for in a prompt
        return (*self.START, "thought\n")


class SeedOssReasoningParser(ThinkReasoningParser):
    START, END = ("<seed:think>",), ("</seed:think>",)
    ENDS_ON = ("<seed:tool_call>",)


class MistralReasoningParser(ThinkReasoningParser):
    """Magistral: `[THINK]…[/THINK]`."""

    START, END = ("[THINK]",), ("[/THINK]",)
    ENDS_ON = ("[TOOL_CALLS]",)


class AppendThinkReasoningParser(ThinkReasoningParser):
    """MiniMax-M2 "append think": no reasoning field; the reasoning stays in the content with the `<think>`
    the prompt opened put back in front, so the client's history round-trips through the template."""

    FORCED = True

    def feed(self, text: str, final: bool) -> tuple[str, str]:
        text, self.held = self.held + text, ""
        if self.mode in ("start", "open"):
            marker, decided = opening(text, self.START, final)
            if not decided:
                self.held = text
                return "", ""
            self.mode = "content"
            if marker is None:
                text = self.START[0] + text
        return "", text


class HunyuanReasoningParser(ThinkReasoningParser):
    """Hunyuan-A13B: `<think>\\n…\\n</think>\\n<answer>\\n…\\n</answer>`; the answer wrapper is not content."""

    START = ("<think>\n", "<think>")
    END = ("\n</think>\n", "\n</think>", "</think>")
    ENDS_ON = ("<tool_calls>",)
    ANSWER = (("<answer>\n", "<answer>"), ("\n</answer>", "</answer>"))

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "answer": "wait", "pending": ""}  # answer: wait | in | out

    @property
    def markers(self) -> tuple[str, ...]:
        return (*super().markers, *self.ANSWER[0], *self.ANSWER[1])

    def content(self, text: str, final: bool) -> str:
        text, self.pending = self.pending + text, ""
        if self.answer == "wait":
            marker, decided = opening(text, self.ANSWER[0], final)
            if not decided:
                self.pending = text
                return ""
            self.answer = "in" if marker is not None else "out"
            text = text.lstrip()[len(marker) :] if marker is not None else text
        if self.answer == "in":
            before, marker, rest = split_markers(text, self.ANSWER[1], final)
            if marker is None:
                self.pending = rest
                return before
            self.answer = "out"
            return before + rest
        return text


class Ernie45ReasoningParser(HunyuanReasoningParser):
    """ERNIE-4.5 thinking: `…</think>\n\n<response>\n…\n</response>`; the response wrapper is not content (vLLM)."""

    START, END, ENDS_ON = ("<think>",), ("</think>",), ()
    ANSWER = (("<response>",), ("</response>",))


class GraniteReasoningParser(Ernie45ReasoningParser):
    """Granite with `thinking=True`: 3.2's plain-text headers (vLLM's), or 3.3's `<think>…</think><response>…
    </response>` (its template; llama.cpp's Granite), the response wrapper not content."""

    START = ("Here is my thought process:", "Here's my thought process:", "<think>")
    END = ("Here is my response:", "Here's my response:", "</think>")


class MiniMaxM3ReasoningParser(ThinkReasoningParser):
    """MiniMax-M3: `<mm:think>…</mm:think>`, open from the start when the prompt's thinking mode opened it."""

    START, END = ("<mm:think>",), ("</mm:think>",)
    ENDS_ON = ("]<]minimax[>[<tool_call>",)


class KimiK3ReasoningParser(HunyuanReasoningParser):
    """Kimi-K3 (XTML): the think channel `<|open|>think<|sep|>…<|close|>think<|sep|>`, open from the start unless
    the request turned thinking off (vLLM); the response channel's wrapper is dropped, and its opener or the
    tools channel's ends the reasoning."""

    START, END = ("<|open|>think<|sep|>",), ("<|close|>think<|sep|>",)
    ENDS_ON = ("<|open|>tools<|sep|>", "<|open|>response<|sep|>")
    ANSWER = (("<|open|>response<|sep|>",), ("<|close|>response<|sep|>",))
    FORCED = True


class Apertus2509ReasoningParser(ThinkReasoningParser):
    """Apertus (SGLang's `apertus2509`): `<|inner_prefix|>…<|inner_suffix|>`; a call there ends it (SGLang hands such
    a call to the tool parser)."""

    START, END = ("<|inner_prefix|>",), ("<|inner_suffix|>",)
    ENDS_ON = ("<|tools_prefix|>",)


class NemotronV2ReasoningParser(ThinkReasoningParser):
    """Nemotron-Nano v2 (llama.cpp's Nemotron V2): `<think>…</think>`, its `<TOOLCALL>` ends it."""

    ENDS_ON = ("<TOOLCALL>",)


class AprielReasoningParser(HunyuanReasoningParser):
    """Apriel 1.5/1.6 Thinker (llama.cpp's Apriel): the template opens `Here are my reasoning steps:\\n`, the answer
    follows `[BEGIN FINAL RESPONSE]`; its closing `[END FINAL RESPONSE]` is not content, `<tool_calls>` ends it."""

    START = ("Here are my reasoning steps:\n", "Here are my reasoning steps:")
    END = ("[BEGIN FINAL RESPONSE]",)
    ENDS_ON = ("<tool_calls>",)
    ANSWER = ((), ("\n[END FINAL RESPONSE]", "[END FINAL RESPONSE]"))
    FORCED = True

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "answer": "in"}


class SolarOpenReasoningParser(ThinkReasoningParser):
    """Solar Open (llama.cpp's Solar Open): `<|think|>…<|end|>`, then messages `<|begin|>assistant<|content|>…<|end|>`
    or `<|tool_calls|>…`; their framing tags are not content, and the answer's or the calls' opener ends the block."""

    START, END = ("<|think|>",), ("<|end|>",)
    ENDS_ON = ("<|content|>", "<|tool_calls|>")
    FRAMING = ("<|begin|>assistant", "<|content|>", "<|end|>", "<|flush|>")

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "carry": ""}

    @property
    def markers(self) -> tuple[str, ...]:
        return (*super().markers, *self.FRAMING)

    @property
    def openers(self) -> tuple[str, ...]:
        return (*self.START, "<|begin|>assistant<|think|>")

    def content(self, text: str, final: bool) -> str:
        text, self.carry = drop_tags(self.carry + text, self.FRAMING, final)
        return text
