"""The reasoning parsers' policy over token ids (vLLM's `is_reasoning_end` / `extract_content_ids`), for an
engine that must hold structured-output constraints until the reasoning is over.

Pure functions of the output ids, the prompt's `started` flag (render's `reasoning_started`) and a
`ReasoningIds` made once per tokenizer from a parser's tags (`reasoning_ids`); they decide exactly as
derender's text parsers (derender_svc/parsers/think.py) do, token for token. Render encodes the tags of its
reasoning parser (`REASONING_TAGS`, by parser name) and sends them in the request (`ReasoningTokens`); the
engine follows each constrained output with a `ReasoningWatch`. Tags that are special tokens are one id;
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


@dataclass(frozen=True)
class ReasoningTags:
    """A reasoning format's tags as text (a derender reasoning parser's START / END / ENDS_ON / FORCED)."""

    START: tuple[str, ...]
    END: tuple[str, ...]
    ENDS_ON: tuple[str, ...] = ()
    FORCED: bool = False


_THINK = ReasoningTags(("<think>",), ("</think>",))
_R1 = ReasoningTags(("<think>",), ("</think>",), FORCED=True)
# The tags of every reasoning parser name derender knows (tests/derender checks they agree with its parsers).
REASONING_TAGS: dict[str, ReasoningTags] = {
    **dict.fromkeys(
        ("think", "deepseek_v3", "nemotron", "ernie45", "olmo3", "telechat4", "xingchen4", "xing4_0"), _THINK
    ),
    **dict.fromkeys(
        ("qwen3-thinking", "mimo", "ling3", "minimax"),
        ReasoningTags(("<think>",), ("</think>",), ("<tool_call>",), FORCED=True),
    ),
    **dict.fromkeys(
        ("qwen3", "deepseek-v3", "glm45", "glm47", "nemotron_v3", "nemotron_3", "nano_v3", "interns1", "poolside_v1"),
        ReasoningTags(("<think>",), ("</think>",), ("<tool_call>",)),
    ),
    "kimi_k2": ReasoningTags(
        ("<think>",), ("</think>",), ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
    ),
    **dict.fromkeys(("deepseek_r1", "deepseek-r1", "step3"), _R1),
    "minimax_m2": ReasoningTags(("<think>",), ("</think>",), ("<minimax:tool_call>",), FORCED=True),
    **dict.fromkeys(("step3p5", "step5"), ReasoningTags(("<think>",), ("</think>",), ("<tool_call>",), FORCED=True)),
    **dict.fromkeys(
        ("deepseek_v4", "deepseek-v4"),
        ReasoningTags(
            ("<think>",), ("</think>",), ("<｜DSML｜tool_calls>", "<｜DSML｜toolcalls>", "<｜DSML｜tool>"), True
        ),
    ),
    "deepseek_v41": ReasoningTags(("<think>",), ("</think>",), ("<｜DSML｜ calls>",), FORCED=True),
    # SGLang's and llama.cpp's names (think.py)
    "deepseek-v41": ReasoningTags(("<think>",), ("</think>",), ("<｜DSML｜ calls>",), FORCED=True),
    **dict.fromkeys(("gigachat35", "iquest_q1"), _R1),
    **dict.fromkeys(("dots", "nanbeige", "berrylm"), ReasoningTags(("<think>",), ("</think>",), ("<tool_call>",))),
    "nemotron_v2": ReasoningTags(("<think>",), ("</think>",), ("<TOOLCALL>",)),
    "apertus2509": ReasoningTags(("<|inner_prefix|>",), ("<|inner_suffix|>",), ("<|tools_prefix|>",)),
    "apriel": ReasoningTags(
        ("Here are my reasoning steps:\n", "Here are my reasoning steps:"),
        ("[BEGIN FINAL RESPONSE]",),
        ("<tool_calls>",),
        FORCED=True,
    ),
    "solar_open": ReasoningTags(("<|think|>",), ("<|end|>",), ("<|content|>", "<|tool_calls|>")),
    **dict.fromkeys(
        ("minimax_append_think", "minimax_m2_append_think", "minimax-append-think"),
        ReasoningTags(("<think>",), ("</think>",), FORCED=True),
    ),
    "kimi": ReasoningTags(("◁think▷",), ("◁/think▷",)),
    "kimi_k3": ReasoningTags(
        ("<|open|>think<|sep|>",),
        ("<|close|>think<|sep|>",),
        ("<|open|>tools<|sep|>", "<|open|>response<|sep|>"),
        FORCED=True,
    ),
    **dict.fromkeys(
        ("minimax_m3", "minimax-m3"), ReasoningTags(("<mm:think>",), ("</mm:think>",), ("]<]minimax[>[<tool_call>",))
    ),
    "granite": ReasoningTags(
        ("Here is my thought process:", "Here's my thought process:", "<think>"),
        ("Here is my response:", "Here's my response:", "</think>"),
    ),
    **dict.fromkeys(
        ("hunyuan", "hunyuan_a13b"),
        ReasoningTags(("<think>\n", "<think>"), ("\n</think>\n", "\n</think>", "</think>"), ("<tool_calls>",)),
    ),
    "seed_oss": ReasoningTags(("<seed:think>",), ("</seed:think>",), ("<seed:tool_call>",)),
    "mistral": ReasoningTags(("[THINK]",), ("[/THINK]",), ("[TOOL_CALLS]",)),
    "gemma": ReasoningTags(("<unused94>thought\n", "<unused94>thought", "<unused94>"), ("<unused95>",)),
    "gemma4": ReasoningTags(
        ("<|channel>thought\n", "<|channel>thought", "<|channel>"), ("<channel|>",), ("<|tool_call>",)
    ),
    **dict.fromkeys(
        ("harmony", "openai_gptoss", "gpt_oss", "gpt-oss"),
        ReasoningTags((), ("<|channel|>final<|message|>",), (), True),
    ),
    # vLLM 0.33's additions
    **dict.fromkeys(("holo2", "hy_v4"), _R1),
    "hy_v3": _THINK,
    "granite_thinking_parser": ReasoningTags(("<think>",), ("</think>",), ("<tool_call>",)),
    "minicpmv": ReasoningTags(("<think>",), ("</think>",), ("<tool_call>",)),
    "k2_horizon": ReasoningTags(
        ("<ifm|think>", "<ifm|think_fast>", "<ifm|think_faster>"),
        ("</ifm|think>", "</ifm|think_fast>", "</ifm|think_faster>"),
        ("<ifm|tool_calls>",),
        FORCED=True,
    ),
    "plamo3": ReasoningTags(
        ("<|plamo:begin_think:plamo|>",),
        ("<|plamo:end_think:plamo|>", "<|plamo:tag|>"),
        ("<|plamo:begin_tool_requests:plamo|>",),
        FORCED=True,
    ),
    "cohere_command3": ReasoningTags(("<|START_THINKING|>",), ("<|END_THINKING|>",), ("<|START_ACTION|>",)),
    "command_r7b": ReasoningTags(("<|START_THINKING|>",), ("<|END_THINKING|>",), ("<|START_ACTION|>",)),
    "cohere_command4": ReasoningTags(("<|START_THINKING|>",), ("<|END_THINKING|>",), ("<|START_ACTION|>",), True),
    # the channel formats: forced, content from the answer block's opener (as harmony's)
    "inkling": ReasoningTags((), ("<|content_text|>",), ("<|content_invoke_tool_json|>",), True),
    **dict.fromkeys(("muse", "musespark1x", "muse_glimmer"), ReasoningTags((), ("to=user<|message|>",), (), True)),
}


def reasoning_ids(parser_cls, encode: Callable[[str], Sequence[int]], blank: Sequence[int] = ()) -> ReasoningIds:
    """The `ReasoningIds` of a reasoning parser class (or `ReasoningTags`); `encode` turns a tag into ids (no
    special tokens added)."""

    def seqs(tags) -> tuple[Ids, ...]:
        return tuple(dict.fromkeys(tuple(encode(tag)) for tag in tags if tag))

    return ReasoningIds(
        seqs(parser_cls.START), seqs(parser_cls.END), seqs(parser_cls.ENDS_ON), parser_cls.FORCED, frozenset(blank)
    )


def tokenizer_spec(tags, encode: Callable[[str], Sequence[int]]) -> ReasoningIds:
    """`tags` (`ReasoningTags` or a parser class) as a tokenizer's ids: each tag as encoded alone, and (plain-text
    tags of a byte-level vocabulary) after a space, where the space merges into the tag's first token (`Ġ</`
    `think` `>`); the whitespace tokens are the blanks."""
    blank = [ids[0] for ids in map(encode, (" ", "\n", "\n\n")) if len(ids) == 1]
    spec = reasoning_ids(tags, encode, blank)
    spaced = {name: tuple(getattr(spec, name)) for name in ("start", "end", "ends_on")}
    for name, attr in (("start", "START"), ("end", "END"), ("ends_on", "ENDS_ON")):
        for tag in getattr(tags, attr):
            alone, after = list(encode(tag)), list(encode(" " + tag))
            if alone and after and after[0] != alone[0] and after[1:] == alone[1:]:
                spaced[name] += (tuple(after),)
    return ReasoningIds(spaced["start"], spaced["end"], spaced["ends_on"], spec.forced, spec.blank)


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


class ReasoningWatch:
    """Follows one output token by token until its reasoning is over (the engine's gate for constraints).

    `feed` returns None while the output is still reasoning (or has not shown whether it opens a block), then,
    once, the output's content ids so far (`extract_content_ids`; empty when the end tag was the last id), and
    after that each new id. It decides as `content_start` does on the output so far, but once the opening is
    known the end tags are looked for only around the newest id: a long reasoning costs O(1) per token.
    """

    __slots__ = ("_base", "done", "ids", "spec", "started")

    def __init__(self, spec: ReasoningIds, started: bool = False) -> None:
        self.spec, self.started = spec, started
        self.ids: list[int] = []
        self._base: int | None = None  # where end tags may start, once the opening is decided
        self.done = False

    @property
    def reasoned(self) -> int | None:
        """Tokens inside the block so far (its opening tag not counted); None while it is not known to be open."""
        if self._base is not None:
            return len(self.ids) - self._base
        return 0 if (self.started or self.spec.forced) and not self.ids else None

    def feed(self, token: int) -> list[int] | None:
        if self.done:
            return [token]
        ids, spec = self.ids, self.spec
        ids.append(token)
        if self._base is None:  # blanks and the start tag: a few ids at most
            at = 0
            while at < len(ids) and ids[at] in spec.blank:
                at += 1
            opened = _match(ids, at, spec.start)
            if _may_start(ids, at, spec.start):
                return None  # an opening tag (or a longer one) may still come
            if not (opened or self.started or spec.forced):
                if at == len(ids):
                    return None
                self.done = True
                return list(ids)
            if at == len(ids):
                return None
            self._base = at + opened
        longest = max((len(s) for s in (*spec.end, *spec.ends_on)), default=1)
        for i in range(max(self._base, len(ids) - longest), len(ids)):
            if n := _match(ids, i, spec.end):
                self.done = True
                return list(ids[i + n :])
            if _match(ids, i, spec.ends_on):
                self.done = True
                return list(ids[i:])
        return None


def to_proto(spec: ReasoningIds, started: bool, message) -> None:
    """Write `spec` into a `scaleout.v1.ReasoningTokens` message."""
    for name in ("start", "end", "ends_on"):
        for seq in getattr(spec, name):
            getattr(message, name).add(token_ids=seq)
    message.forced, message.started = spec.forced, started
    message.blank.extend(sorted(spec.blank))


def from_proto(message) -> tuple[ReasoningIds, bool]:
    """(spec, started) from a `scaleout.v1.ReasoningTokens` message."""

    def seqs(items) -> tuple[Ids, ...]:
        return tuple(tuple(s.token_ids) for s in items if s.token_ids)

    spec = ReasoningIds(
        seqs(message.start), seqs(message.end), seqs(message.ends_on), message.forced, frozenset(message.blank)
    )
    return spec, message.started
