"""The item budget (engine_svc/structured/items.py): a list that may end after any whole item opens no item that
the tokens left cannot hold. Unit tests walk a guide over a tiny vocabulary (characters, and `},` / `}]`, which
pass an end point inside them) on both grammar backends; the engine test runs the tiny random model on a forced
call's shape, with and without `items`."""

from __future__ import annotations

import asyncio
import json

import pytest
import xgrammar as xgr

from engine_svc.structured.guide import Guide
from engine_svc.structured.items import ItemBudget, ItemVocab
from engine_svc.structured.llguidance_backend import LLGuidanceBackend
from engine_svc.structured.spec import Constraint, ItemList
from engine_svc.structured.xgrammar_backend import XGrammarBackend
from scaleout.v1 import common_pb2
from scaleout_common.reasons import Reason
from tests.engine.conftest import TINY_EOS, generate
from tests.engine.test_structured_outputs import PROMPTS, constrained, finish, guided_stub, refused, text

EOS = 0
VOCAB = ["</s>"] + [chr(i) for i in range(32, 127)] + ["},", "}]"]
ID = {token: i for i, token in enumerate(VOCAB)}
LIST = {
    "type": "array",
    "minItems": 1,
    "items": {"type": "object", "properties": {"a": {"enum": ["x", "yy"]}}, "required": ["a"]},
}
ITEMS = ItemList(b"]", b",")
BACKENDS = {
    # compact JSON: xgrammar writes ", " and ": " between tokens, llguidance "," and ":"
    "xgrammar": (XGrammarBackend.from_vocab, ", ", ": "),
    "llguidance": (LLGuidanceBackend.from_vocab, ",", ":"),
}


def walk(backend_name: str, max_tokens: int, *pieces: str) -> tuple[Guide, list[str]]:
    """A guide after `pieces` (each a token of VOCAB, or a string of one-character tokens), and the tokens its
    next row allows."""
    build, _, _ = BACKENDS[backend_name]
    backend = build(VOCAB, len(VOCAB), [EOS])
    grammar = backend.compile(Constraint("json_schema", json.dumps(LIST), any_whitespace=False))
    matcher = backend.matcher(grammar, frozenset([EOS]))
    vocab = ItemVocab([token.encode() for token in VOCAB], ITEMS)
    guide = Guide(matcher, items=ItemBudget(vocab, max_tokens))
    for piece in pieces:
        for token in [ID[piece]] if piece in ID else [ID[c] for c in piece]:
            assert matcher.fork().accept(token), (piece, token)
            guide.accept(token)
    bitmask = xgr.allocate_token_bitmask(1, len(VOCAB))
    matcher.fill(bitmask, 0)
    guide.adjust(bitmask, 0)
    allowed = [VOCAB[i] for i in range(len(VOCAB)) if (int(bitmask[0, i // 32]) >> (i % 32)) & 1]
    return guide, allowed


def item(backend_name: str, value: str) -> str:
    _, _, key = BACKENDS[backend_name]
    return '{"a"' + key + f'"{value}"'


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_list_ends_when_the_tokens_left_cannot_hold_another_item(backend):
    first = "[" + item(backend, "x") + "}"  # the one whole item: the list's opening and the call
    reserve = len(first) + 1 + 1  # another as long, the end and a stop token
    guide, allowed = walk(backend, len(first) + reserve, first)
    assert guide.items is not None and guide.items.longest == len(first) and guide.items.at_end
    assert "," in allowed and "]" in allowed  # just enough: it may go on
    _, allowed = walk(backend, len(first) + reserve - 1, first)
    assert allowed == ["]"]  # one token short: only the end


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_token_that_passes_an_end_point_and_goes_on_is_counted_and_held(backend):
    sep = BACKENDS[backend][1]
    head = "[" + item(backend, "x")  # `},` closes the first item and writes the separator
    second = sep[1:] + item(backend, "yy") + "}"
    guide, _ = walk(backend, 100, head, "},", second)
    longest = max(len(head) + 1, len(second))
    assert guide.items is not None and guide.items.longest == longest
    # inside the third item, short of tokens: `}` and `}]` close it, `},` would open a fourth
    third = "," + sep[1:] + item(backend, "x")
    used = len(head) + 1 + len(second) + len(third)
    _, allowed = walk(backend, used + longest + 1, head, "},", second, third)
    assert "}" in allowed and "}]" in allowed and "}," not in allowed
    _, allowed = walk(backend, used + longest + 3, head, "},", second, third)
    assert "}," in allowed  # (after it: an item as long, the end and a stop token)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_first_item_is_not_passed_when_the_budget_cannot_hold_a_second(backend):
    """The first item closes inside `},`: its own length is the estimate there."""
    head = "[" + item(backend, "x")
    _, allowed = walk(backend, 2 * (len(head) + 1) + 1, head)
    assert "}" in allowed and "}," not in allowed
    _, allowed = walk(backend, 2 * (len(head) + 1) + 3, head)
    assert "}," in allowed


def test_the_first_item_is_the_grammars_own():
    """No item is whole yet: nothing to estimate from, nothing narrowed (the list needs one)."""
    guide, allowed = walk("xgrammar", 3, "[")
    assert guide.items is not None and guide.items.longest is None and allowed == ["{"]


async def test_forced_lists_end_whole_under_max_tokens():
    """The tiny random model on a list of fixed-size items: with `items` every output ends with the list's end
    and a stop token; without, some open an item the length cut leaves open. An `items` without its end is
    refused, naming it."""
    schema = json.dumps(LIST)
    items = common_pb2.StructuredOutputs.ItemList(end="]", separators=",")
    async with guided_stub() as (stub, _):

        def run(with_items: bool):
            jobs = []
            for prompt in PROMPTS:
                message = constrained(prompt, max_tokens=40, json_schema=schema, disable_any_whitespace=True)
                if with_items:
                    message.sampling_params.structured_outputs.items.CopyFrom(items)
                jobs.append(generate(stub, message))
            return asyncio.gather(*jobs)

        held, free = await run(True), await run(False)
        bad = constrained(PROMPTS[0], json_schema=schema)
        bad.sampling_params.structured_outputs.items.separators = ","
        error = await refused(stub, bad)
        assert (
            error.reason == Reason.INVALID_GRAMMAR
            and error.violations[0][0] == "sampling_params.structured_outputs.items"
        )
    for messages, tokens in held:
        assert finish(messages) == common_pb2.FINISH_REASON_STOP, text(tokens[0])
        assert tokens[0][-1] == TINY_EOS and json.loads(text(tokens[0]))
    assert any(finish(messages) == common_pb2.FINISH_REASON_LENGTH for messages, _ in free)
