"""vLLM's token-id reasoning checks as vLLM makes them, over the tags of `reasoning_ids.py`: whether a whole
sequence (a prompt, or a prompt and its output so far) ends its reasoning, the content after the first end tag,
and the count of reasoning tokens (the depth counter of vLLM's `count_reasoning_tokens`). Derender's usage and
its CheckReasoning RPC use them; the text parsers' own policy over an output is `reasoning_ids.content_start`."""

from __future__ import annotations

from collections.abc import Sequence

from scaleout_common.reasoning_ids import ReasoningIds, ReasoningTags, _match, _may_start

# Formats whose reasoning is one channel's messages, where the parser's own tags (reasoning until the answer's
# opener) would count every id before the answer, headers and other channels included: the spans counted are that
# channel's message bodies (harmony: `analysis`, as OpenAI counts gpt-oss's reasoning tokens; its `commentary`
# preambles and calls, and text outside any message, are not reasoning).
COUNTED_TAGS: dict[str, ReasoningTags] = dict.fromkeys(
    ("harmony", "openai_gptoss", "gpt_oss", "gpt-oss"),
    ReasoningTags(("<|channel|>analysis<|message|>",), ("<|end|>", "<|call|>", "<|return|>")),
)


def sequence_reasoning_end(ids: Sequence[int], spec: ReasoningIds) -> bool:
    """vLLM's `ReasoningParser.is_reasoning_end(input_ids)` over a whole sequence (a prompt, or a prompt and its
    output so far): the last reasoning tag in it is an end (or `ends_on`) tag; no tag at all: not over."""
    tags = (*spec.start, *spec.end, *spec.ends_on)
    for at in range(len(ids) - 1, -1, -1):
        if _match(ids, at, tags):
            return not _match(ids, at, spec.start)
    return False


def sequence_content_ids(ids: Sequence[int], spec: ReasoningIds) -> list[int]:
    """vLLM's `extract_content_ids`: the ids after the first end tag (from an `ends_on` tag on), none while no
    such tag has an id after it."""
    for at in range(len(ids)):
        if n := _match(ids, at, spec.end):
            return list(ids[at + n :])
        if _match(ids, at, spec.ends_on):
            return list(ids[at:])
    return []


class ReasoningCounter:
    """Counts an output's reasoning tokens as they come, as vLLM's `count_reasoning_tokens` does: the ids inside
    start/end tags, nested spans and later blocks too (a depth counter), the tags not counted. An output the
    prompt opened (or a forced family) starts inside (a start tag it repeats first is skipped, as the text
    parsers skip it); an `ends_on` tag (a tool call) closes every open span. Memory is O(longest tag): only ids
    that may still begin a tag are kept back. The whole state is `state()` (JSON-able)."""

    __slots__ = ("blanks", "counted", "depth", "firsts", "lead", "spec", "window")

    def __init__(self, spec: ReasoningIds, started: bool = False, state: dict | None = None) -> None:
        state = state or {}
        self.spec = spec
        opened = started or spec.forced
        self.depth = int(state.get("d", 1 if opened else 0))
        self.lead = bool(state.get("l", opened))  # before the first id of an output opened by the prompt
        self.blanks = int(state.get("b", 0))  # lead blanks: reasoning unless a start tag follows
        self.window = [int(i) for i in state.get("w", ())]  # ids that may begin a tag
        self.counted = int(state.get("n", 0))
        self.firsts = {seq[0] for seq in (*spec.start, *spec.end, *spec.ends_on)}  # ids a tag may begin with

    def feed(self, ids: Sequence[int]) -> None:
        if not self.window and not self.lead:  # the common case: ids that begin no tag are counted at once
            for at, token in enumerate(ids):
                if token in self.firsts:
                    self.window = list(ids[at:])
                    break
                self.counted += 1 if self.depth else 0
            else:
                return
        else:
            self.window += ids
        self._drain(False)

    def finish(self) -> None:
        """The output is over: the ids kept back are what they are."""
        self._drain(True)
        self.counted += self.blanks if self.depth else 0
        self.blanks = 0

    @property
    def count(self) -> int:
        """Reasoning tokens so far (ids that may still begin a tag count once they are known not to)."""
        return self.counted

    def _drain(self, final: bool) -> None:
        ids, spec, at = self.window, self.spec, 0
        while at < len(ids):
            if not final and any(_may_start(ids, at, tags) for tags in (spec.start, spec.end, spec.ends_on)):
                break
            if self.lead and ids[at] in spec.blank:
                self.blanks, at = self.blanks + 1, at + 1
                continue
            if n := _match(ids, at, spec.start):
                self.depth += 0 if self.lead else 1
                self.lead, self.blanks, at = False, 0, at + n
                continue
            if self.lead:
                self.lead, self.counted, self.blanks = False, self.counted + self.blanks, 0
            if n := _match(ids, at, spec.end):
                self.depth, at = max(self.depth - 1, 0), at + n
            elif self.depth and (n := _match(ids, at, spec.ends_on)):
                self.depth, at = 0, at + n
            else:
                self.counted, at = self.counted + (1 if self.depth else 0), at + 1
        self.window = ids[at:]

    def state(self) -> dict:
        return {"d": self.depth, "l": self.lead, "b": self.blanks, "w": list(self.window), "n": self.counted}


def count_reasoning_tokens(ids: Sequence[int], spec: ReasoningIds, started: bool = False) -> int:
    """The reasoning tokens of the output `ids`, taken as whole."""
    counter = ReasoningCounter(spec, started)
    counter.feed(ids)
    counter.finish()
    return counter.count
