"""The reasoning parsers' policy over token ids (vLLM's `is_reasoning_end` / `extract_content_ids`), for an
engine that must hold structured-output constraints until the reasoning is over.

Pure functions of the output ids, the prompt's `started` flag (render's `reasoning_started`) and a
`ReasoningIds` made once per tokenizer from a parser's tags (`reasoning_ids`); they decide exactly as the text
parsers in think.py do, token for token. Standard library only and JSON-able (`as_dict`), so it can move to
the shared package or travel in a request without pulling derender in. Tags that are special tokens are one id;
plain-text tags (Granite's headers) are matched as the tokenizer encodes them alone, which is best effort.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

Ids = tuple[int, ...]


@dataclass(frozen=True)
class ReasoningIds:
    start: tuple[Ids, ...]  # id sequences that open the block
    end: tuple[Ids, ...]  # that close it
    ends_on: tuple[Ids, ...] = ()  # that close it and belong to the content (Qwen3's <tool_call>)
    forced: bool = False  # the family always reasons first
    blank: frozenset[int] = frozenset()  # whitespace tokens allowed before a start tag

    def as_dict(self) -> dict:
        return {**asdict(self), "blank": sorted(self.blank)}

    @classmethod
    def from_dict(cls, data: dict) -> ReasoningIds:
        seqs = {k: tuple(tuple(s) for s in data.get(k, ())) for k in ("start", "end", "ends_on")}
        return cls(**seqs, forced=bool(data.get("forced")), blank=frozenset(data.get("blank", ())))


def reasoning_ids(parser_cls, encode: Callable[[str], Sequence[int]], blank: Sequence[int] = ()) -> ReasoningIds:
    """The `ReasoningIds` of a reasoning parser class; `encode` turns a tag into ids (no special tokens added)."""

    def seqs(tags) -> tuple[Ids, ...]:
        return tuple(dict.fromkeys(tuple(encode(tag)) for tag in tags if tag))

    return ReasoningIds(
        seqs(parser_cls.START), seqs(parser_cls.END), seqs(parser_cls.ENDS_ON), parser_cls.FORCED, frozenset(blank)
    )


def _match(ids: Sequence[int], at: int, options: tuple[Ids, ...]) -> int:
    """Length of the longest option found at `at` (0: none)."""
    best = 0
    for seq in options:
        if len(seq) > best and tuple(ids[at : at + len(seq)]) == seq:
            best = len(seq)
    return best


def _may_start(ids: Sequence[int], at: int, options: tuple[Ids, ...]) -> bool:
    """ids[at:] is a proper prefix of an option (the next ids decide)."""
    tail = tuple(ids[at:])
    return any(len(seq) > len(tail) and seq[: len(tail)] == tail for seq in options)


def content_start(ids: Sequence[int], spec: ReasoningIds, started: bool = False) -> int | None:
    """Index of the first content id of the output `ids`; None while the output is still reasoning (or has
    not yet shown whether it opens a block)."""
    at = 0
    while at < len(ids) and ids[at] in spec.blank:
        at += 1
    opened = _match(ids, at, spec.start)
    if not opened and _may_start(ids, at, spec.start):
        return None
    if not (opened or started or spec.forced):
        return None if at == len(ids) else 0
    for i in range(at + opened, len(ids)):
        if n := _match(ids, i, spec.end):
            return i + n
        if _match(ids, i, spec.ends_on):
            return i
    return None


def is_reasoning_end(ids: Sequence[int], spec: ReasoningIds, started: bool = False) -> bool:
    """True once the reasoning is over: constrained decoding may start."""
    return content_start(ids, spec, started) is not None


def extract_content_ids(ids: Sequence[int], spec: ReasoningIds, started: bool = False) -> list[int]:
    """The ids after the reasoning (empty while it goes on)."""
    at = content_start(ids, spec, started)
    return [] if at is None else list(ids[at:])
