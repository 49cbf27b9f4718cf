"""`chat_template_kwargs.force_nonempty_content`: an answer that is all reasoning gets it as its content. (Also the
one other kwargs rule of reasoning parsing, `unforced`.)

SGLang honours the kwarg for every reasoning parser, vLLM's `nemotron_v3` (and SGLang's `granite_thinking_parser`)
also when `enable_thinking` is false (`force_content` below); SGLang's `telechat4` (`xingchen4`, `xing4_0`) has it
on always (its detector's default, which the kwarg only sets). Both peers differ between their two paths, and so does this:
- one-shot (vLLM's `extract_reasoning`, SGLang's `detect_and_parse`): when the content after the reasoning is
  blank, reasoning and content swap places (the blank content becomes the reasoning). Nobody sees a one-shot
  answer's deltas, so the reasoning (and blank content) is held until the end decides;
- stream: the reasoning streams as reasoning; if the answer ends still inside the block, the whole reasoning is
  sent again as content at the end (vLLM's `get_streaming_fallback_content`, SGLang's `finish`). A block that
  closed with nothing after it is left as it is, as both peers do.
"""

from __future__ import annotations

from google.protobuf import struct_pb2

THINKING_OFF = ("nemotron_v3", "nemotron_3", "nano_v3", "granite_thinking_parser")
ALWAYS = ("telechat4", "xingchen4", "xing4_0")
UNFORCED = ("deepseek_v4", "deepseek-v4", "deepseek_v41", "deepseek-v41", "iquest_q1")


def _flag(kwargs: struct_pb2.Struct, name: str) -> bool | None:
    value = kwargs.fields.get(name)
    return value.bool_value if value is not None and value.WhichOneof("kind") == "bool_value" else None


def force_content(kwargs: struct_pb2.Struct, reasoning_parser: str | None) -> bool:
    if reasoning_parser is None:
        return False
    thinking_off = reasoning_parser in THINKING_OFF and _flag(kwargs, "enable_thinking") is False
    return _flag(kwargs, "force_nonempty_content") is True or thinking_off or reasoning_parser in ALWAYS


def unforced(kwargs: struct_pb2.Struct, reasoning_parser: str | None) -> bool:
    """The request turned off the thinking of a family that otherwise reasons from the first token, so its block
    opens only where the prompt or a start tag opens it: vLLM's `deepseek_v4`/`deepseek_v41` when `thinking` /
    `enable_thinking` is set and neither is true, or `reasoning_effort` is "none"; SGLang's `iquest_q1` by the same
    two flags (its IQuestQ1ReasoningDetector.thinking_enabled)."""
    if reasoning_parser not in UNFORCED:
        return False
    flags = [_flag(kwargs, name) for name in ("thinking", "enable_thinking")]
    effort = kwargs.fields.get("reasoning_effort")
    no_effort = reasoning_parser != "iquest_q1" and effort is not None and effort.string_value == "none"
    return (any(flag is not None for flag in flags) and not any(flags)) or no_effort


class ForceContent:
    """One choice's swap; its whole state is `state()` (JSON-able)."""

    def __init__(self, streamed: bool, state: dict | None = None):
        state = state or {}
        self.streamed = streamed
        self.thought = state.get("h", "")  # the reasoning so far
        self.blank = state.get("q", "")  # one-shot: blank content held until the answer shows it is not empty
        self.answered = state.get("a", False)  # one-shot: non-blank content came
        if not (isinstance(self.thought, str) and isinstance(self.blank, str) and isinstance(self.answered, bool)):
            raise TypeError("force_nonempty_content state")  # a state this service did not write

    def step(self, reasoning: str, content: str, final: bool, in_reasoning: bool) -> tuple[str, str]:
        """(reasoning, content) to show, from what the reasoning parser made of one piece of text."""
        self.thought += reasoning
        if self.streamed:
            return reasoning, content + (self.thought if final and in_reasoning else "")
        if not self.answered:
            if content.strip():
                self.answered, content, self.blank = True, self.blank + content, ""
            else:
                self.blank, content = self.blank + content, ""
        if not final:
            return "", content
        return (self.thought, content) if self.answered else (self.blank, self.thought)

    def state(self) -> dict:
        return {"h": self.thought, "q": self.blank, "a": self.answered}
