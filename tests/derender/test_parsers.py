"""Each parser against its cases; streamed under random chunking (with the state round-tripped through JSON
as the stateless twin does) it gives exactly its one-shot result."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from derender_svc.parsers import (
    HermesToolParser,
    Llama3JsonToolParser,
    MistralToolParser,
    PythonicToolParser,
    ThinkReasoningParser,
)
from tests.derender import parser_cases


def run(make, text: str, cuts: list[int]):
    """Feed `text` in pieces, rebuilding the parser from its JSON state each time; fold the outputs."""
    pieces, start = [], 0
    for size in cuts:
        pieces.append(text[start : start + size])
        start += size
    pieces.append(text[start:])
    parser, firsts, seconds = make(), [], []
    for i, piece in enumerate(pieces):
        parser = type(parser)(**json.loads(json.dumps(parser.state())))
        first, second = parser.feed(piece, i == len(pieces) - 1)
        firsts.append(first)
        seconds.append(second)
    if isinstance(parser, ThinkReasoningParser):
        return "".join(firsts), "".join(seconds)
    calls: dict[int, list] = {}
    for delta in (d for batch in seconds for d in batch):
        entry = calls.setdefault(delta.index, [None, ""])
        entry[0] = entry[0] or delta.name
        entry[1] += delta.arguments
    return "".join(firsts), [tuple(calls[i]) for i in sorted(calls)]


def chunkings(text: str, seed: int, count: int = 12):
    rng = random.Random(seed)
    yield [1] * len(text)
    for _ in range(count):
        yield [rng.randint(0, 7) for _ in range(len(text))]


def check_tools(make, text, content, expected):
    got_content, got_calls = run(make, text, [])
    assert got_content == content
    if expected is not None:
        assert [name for name, _ in got_calls] == [name for name, _ in expected]
        for (_, arguments), (_, args) in zip(got_calls, expected):
            if args is not None:
                assert json.loads(arguments) == args
    for _seed, cuts in enumerate(chunkings(text, hash(text) & 0xFFFF)):
        assert run(make, text, cuts) == (got_content, got_calls), cuts


TOOL_CASES = [
    pytest.param(parser, *case, id=f"{parser.__name__}-{i}")
    for parser, cases in (
        (HermesToolParser, parser_cases.hermes_cases()),
        (Llama3JsonToolParser, parser_cases.llama3_cases()),
        (MistralToolParser, parser_cases.mistral_cases()),
        (PythonicToolParser, parser_cases.pythonic_cases()),
    )
    for i, case in enumerate(cases)
]


@pytest.mark.parametrize("parser,text,content,calls", TOOL_CASES)
def test_tool_parser(parser, text, content, calls):
    check_tools(parser, text, content, calls)


@pytest.mark.parametrize("text,started,reasoning,content", parser_cases.think_cases())
def test_think(text, started, reasoning, content):
    make = lambda: ThinkReasoningParser.create(started)  # noqa: E731
    assert run(make, text, []) == (reasoning, content)
    for cuts in chunkings(text, len(text)):
        assert run(make, text, cuts) == (reasoning, content), cuts


def test_case_counts():
    assert (
        min(
            len(parser_cases.hermes_cases()),
            len(parser_cases.llama3_cases()),
            len(parser_cases.mistral_cases()),
            len(parser_cases.pythonic_cases()),
            len(parser_cases.think_cases()),
        )
        >= 40
    )


PIECES = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<|python_tag|>",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    '"',
    "'",
    "\\",
    ":",
    ",",
    ";",
    "=",
    " ",
    "\n",
    '"name"',
    '"arguments"',
    '"parameters"',
    '"f"',
    "f",
    "x",
    "1",
    "é",
    "🎉",
    "<",
    "tool",
    "name=",
    "a=1",
    "[TOOL_CALLS]",
    "[TOOL",
    "[ARGS]",
    "[AR",
]
PARSERS = [
    HermesToolParser,
    Llama3JsonToolParser,
    MistralToolParser,
    PythonicToolParser,
    lambda: ThinkReasoningParser.create(False),
    lambda: ThinkReasoningParser.create(True),
]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), max_size=40),
    cuts=st.lists(st.integers(0, 9), max_size=40),
    which=st.integers(0, len(PARSERS) - 1),
)
def test_fuzz_chunking_invariance(pieces, cuts, which):
    """Arbitrary marker soup: never an exception, and chunking never changes the result."""
    text = "".join(pieces)
    assert run(PARSERS[which], text, cuts) == run(PARSERS[which], text, [])
