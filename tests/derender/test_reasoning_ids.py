"""The token-id reasoning API decides as the text parsers do: over random outputs made of whole-token pieces,
the content ids it extracts are exactly the text parser's content."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from derender_svc.parsers import REASONING_PARSERS, reasoning_spec
from scaleout_common.reasoning_counts import (
    COUNTED_TAGS,
    ReasoningCounter,
    count_reasoning_tokens,
    sequence_content_ids,
    sequence_reasoning_end,
)
from scaleout_common.reasoning_ids import (
    REASONING_TAGS,
    ReasoningIds,
    ReasoningWatch,
    content_start,
    extract_content_ids,
    from_proto,
    is_reasoning_end,
    reasoning_ids,
    to_proto,
)

WORDS = ["a", "b c", "你好", "x=1", " ", "\n", "<tool_call>", "{}"]
FAMILIES = ["think", "qwen3", "deepseek_r1", "kimi", "granite", "gemma", "seed_oss", "mistral", "minimax_m2"]
FAMILIES += ["glm45", "kimi_k2", "gemma4"]  # not hunyuan: its newline-bearing tags and answer wrapper are text-only


def vocab_for(name: str) -> list[str]:
    cls = REASONING_PARSERS[name]
    return list(dict.fromkeys([*WORDS, *cls.START, *cls.END, *cls.ENDS_ON]))


def spec_for(name: str, vocab: list[str]) -> ReasoningIds:
    blank = [i for i, piece in enumerate(vocab) if not piece.strip()]
    return reasoning_spec(name, lambda tag: [vocab.index(tag)], blank)


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(FAMILIES), data=st.data(), started=st.booleans())
def test_ids_agree_with_text(name, data, started):
    vocab = vocab_for(name)
    ids = data.draw(st.lists(st.integers(0, len(vocab) - 1), max_size=12))
    parser = REASONING_PARSERS[name].create(started)
    _, content = parser.feed("".join(vocab[i] for i in ids), True)
    spec = spec_for(name, vocab)
    at = content_start(ids, spec, started)
    if at is None:  # still reasoning, or nothing but blanks so far
        assert content == "" or not content.strip()
    else:
        assert "".join(vocab[i] for i in extract_content_ids(ids, spec, started)) == content
        assert is_reasoning_end(ids, spec, started)


V = {"<think>": 1, "</think>": 2, "<tool_call>": 3, "\n": 4, "hi": 5}
THINK = ReasoningIds(start=((1,),), end=((2,),), blank=frozenset({4}))
QWEN3 = ReasoningIds(start=((1,),), end=((2,),), ends_on=((3,),), blank=frozenset({4}))
R1 = ReasoningIds(start=((1,),), end=((2,),), forced=True)


@pytest.mark.parametrize(
    "spec,ids,started,expected",
    [
        (THINK, [], False, None),  # the first token decides
        (THINK, [4], False, None),
        (THINK, [5, 1, 2], False, 0),  # no opening tag: all content
        (THINK, [1, 5], False, None),
        (THINK, [1, 5, 2, 5], False, 3),
        (THINK, [4, 1, 5, 2], False, 4),
        (THINK, [5, 2, 5], True, 2),  # the prompt opened the block
        (THINK, [1, 5, 2, 5], True, 3),  # a repeated <think> is skipped
        (THINK, [5], True, None),
        (R1, [5, 5], False, None),  # forced: no tags at all is reasoning
        (R1, [5, 2], False, 2),
        (R1, [2], False, 1),
        (QWEN3, [1, 5, 3, 5], False, 2),  # <tool_call> ends the reasoning and is content
        (QWEN3, [1, 5, 2, 3], False, 3),
    ],
)
def test_content_start(spec, ids, started, expected):
    assert content_start(ids, spec, started) == expected
    assert is_reasoning_end(ids, spec, started) == (expected is not None)
    assert extract_content_ids(ids, spec, started) == ([] if expected is None else ids[expected:])


def test_harmony_ends_at_the_final_channel():
    vocab = {"<|channel|>": 10, "final": 11, "analysis": 12, "<|message|>": 13, "<|end|>": 14, "x": 15}
    vocab |= {"<|call|>": 16, "<|return|>": 17}

    def encode(text: str) -> list[int]:
        out = []
        while text:
            token = next(t for t in sorted(vocab, key=len, reverse=True) if text.startswith(t))
            out.append(vocab[token])
            text = text[len(token) :]
        return out

    spec = reasoning_spec("harmony", encode)
    ids = encode("<|channel|>analysis<|message|>x<|end|><|channel|>final<|message|>xx")
    assert extract_content_ids(ids, spec) == [15, 15]
    assert not is_reasoning_end(ids[:-3], spec)
    # Counted: the analysis messages' bodies only, not headers, other channels or text outside any message.
    counting = reasoning_ids(COUNTED_TAGS["harmony"], encode)
    assert count_reasoning_tokens(ids, counting) == 1
    assert count_reasoning_tokens(encode("xx<|channel|>final<|message|>x"), counting) == 0
    assert count_reasoning_tokens(encode("<|channel|>analysis<|message|>xxx"), counting) == 3  # cut off inside


def test_round_trips_through_json():
    spec = ReasoningIds(start=((1, 2),), end=((3,),), ends_on=((4,),), forced=True, blank=frozenset({9}))
    assert ReasoningIds.from_dict(spec.as_dict()) == spec


def test_shared_tags_are_the_parsers_tags():
    """Render encodes REASONING_TAGS for the engine's gate; they must be what derender's parsers split on (but
    for the parsers whose tags the model's response_template declares)."""
    fixed = {name: cls for name, cls in REASONING_PARSERS.items() if not getattr(cls, "TEMPLATE", False)}
    assert set(REASONING_TAGS) == set(fixed)
    for name, cls in fixed.items():
        tags = REASONING_TAGS[name]
        assert (tags.START, tags.END, tags.ENDS_ON, tags.FORCED) == (cls.START, cls.END, cls.ENDS_ON, cls.FORCED), name


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(FAMILIES), data=st.data(), started=st.booleans())
def test_watch_decides_as_content_start_on_every_prefix(name, data, started):
    vocab = vocab_for(name)
    ids = data.draw(st.lists(st.integers(0, len(vocab) - 1), max_size=14))
    spec = spec_for(name, vocab)
    watch = ReasoningWatch(spec, started)
    content: list[int] | None = None
    for k, token in enumerate(ids, 1):
        out = watch.feed(token)
        if content is None:
            expected = content_start(ids[:k], spec, started)
            assert (out is None) == (expected is None), (ids[:k], out, expected)
            if out is not None:
                assert out == ids[:k][expected:]
                content = list(out)
        else:
            assert out == [token]


def test_reasoning_tokens_round_trip_through_the_contract():
    from scaleout.v1 import common_pb2

    spec = ReasoningIds(start=((1, 2),), end=((3,),), ends_on=((4,),), forced=True, blank=frozenset({9}))
    message = common_pb2.ReasoningTokens()
    to_proto(spec, True, message)
    assert from_proto(message) == (spec, True)


@pytest.mark.parametrize(
    "spec,ids,started,expected",
    [
        (THINK, [1, 5, 5, 2, 5], False, 2),  # the tags are not counted
        (THINK, [5, 5], False, 0),  # no tags: no reasoning
        (THINK, [5, 1, 5, 2], False, 1),  # a block anywhere counts (vLLM's depth counter)
        (THINK, [1, 5, 1, 5, 2, 5, 2], False, 3),  # nested (vLLM's test): the inner tags are not counted
        (THINK, [4, 1, 5, 5], False, 2),  # cut inside the block: all of it
        (THINK, [5, 5, 2, 5], True, 2),  # the prompt opened it
        (THINK, [4, 5, 2], True, 2),  # ... and its leading blank is reasoning too
        (THINK, [1, 5, 2, 1, 5, 2], False, 2),  # every block
        (THINK, [4, 1, 5, 2], True, 1),  # opened by the prompt: a repeated start tag (and blanks before it) skipped
        (THINK, [5, 2, 2, 5], True, 1),  # a stray end tag takes nothing below zero
        (R1, [5, 5, 5], False, 3),
        (QWEN3, [1, 5, 3, 5], False, 1),  # <tool_call> ends it
        (ReasoningIds(start=((1, 7),), end=((2, 8),)), [1, 7, 5, 2, 5, 2, 8, 5], False, 3),  # multi-id tags
    ],
)
def test_count_reasoning_tokens(spec, ids, started, expected):
    assert count_reasoning_tokens(ids, spec, started) == expected


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(FAMILIES), data=st.data(), started=st.booleans())
def test_counter_is_chunking_invariant(name, data, started):
    """Fed in any chunks, its state round-tripped through JSON (as the stateless twin does), the count is the
    one-shot count."""
    vocab = vocab_for(name)
    ids = data.draw(st.lists(st.integers(0, len(vocab) - 1), max_size=14))
    cuts = data.draw(st.lists(st.integers(1, 4), max_size=14))
    spec, state, at = spec_for(name, vocab), None, 0
    for size in [*cuts, len(ids)]:
        counter = ReasoningCounter(spec, started, json.loads(json.dumps(state)) if state else None)
        counter.feed(ids[at : at + size])
        state, at = counter.state(), at + size
    counter.finish()
    assert counter.count == count_reasoning_tokens(ids, spec, started)


@pytest.mark.parametrize(
    "spec,ids,ended,content",
    [  # vLLM's tests of BaseThinkingReasoningParser.is_reasoning_end / extract_content_ids
        (THINK, [5, 5, 2, 5], True, [5]),
        (THINK, [5, 5, 5], False, []),
        (THINK, [], False, []),
        (THINK, [5, 1, 5, 2], True, []),  # the end tag last: over, no content yet
        (THINK, [5, 1, 5, 5], False, []),
        (THINK, [5, 1, 5, 2, 5, 5, 1], False, [5, 5, 1]),  # a later start tag: reasoning again
        (QWEN3, [1, 5, 3, 5], True, [3, 5]),  # <tool_call> ends it and is content
    ],
)
def test_sequence_checks_are_vllms(spec, ids, ended, content):
    assert sequence_reasoning_end(ids, spec) == ended
    assert sequence_content_ids(ids, spec) == content
