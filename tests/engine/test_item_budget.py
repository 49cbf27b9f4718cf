"""The item budget (engine_svc/structured/items.py): a list that may end after any whole item opens no item that
the tokens left cannot hold. Unit tests walk a guide over a tiny vocabulary (characters, and `},` / `}]`, which
pass an end point inside them) on both grammar backends; the engine test runs the tiny random model on a forced
call's shape, with and without `items`. A list's vocabulary is built by the grammar compiler's pool, never by the
caller (the step loop)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
import xgrammar as xgr

from engine_svc.structured import compiler as compiler_module
from engine_svc.structured.compiler import GrammarCompiler
from engine_svc.structured.guide import Guide
from engine_svc.structured.items import ItemBudget, ItemVocab
from engine_svc.structured.llguidance_backend import LLGuidanceBackend
from engine_svc.structured.spec import Constraint, ItemList
from engine_svc.structured.xgrammar_backend import XGrammarBackend
from render_svc.structured import CALLS_SEPARATOR, HERMES, strict_auto_tag
from scaleout.v1 import common_pb2
from scaleout_common.reasons import Reason
from tests.engine.conftest import TINY_EOS, generate
from tests.engine.test_structured_outputs import PROMPTS, constrained, finish, guided_stub, refused, text

EOS = 0
VOCAB = ["</s>"] + [chr(i) for i in range(32, 127)] + ["},", "}]", "\n", ">\n<"]
ID = {token: i for i, token in enumerate(VOCAB)}
LIST = {
    "type": "array",
    "minItems": 1,
    "items": {"type": "object", "properties": {"a": {"enum": ["x", "yy"]}}, "required": ["a"]},
}
ITEMS = ItemList(b"]", b",")
LISTED = Constraint("json_schema", json.dumps(LIST), any_whitespace=False)
BACKENDS = {
    # compact JSON: xgrammar writes ", " and ": " between tokens, llguidance "," and ":"
    "xgrammar": (XGrammarBackend.from_vocab, ", ", ": "),
    "llguidance": (LLGuidanceBackend.from_vocab, ",", ":"),
}


def walk(
    backend_name: str, max_tokens: int, *pieces: str, constraint: Constraint = LISTED, items: ItemList = ITEMS
) -> tuple[Guide, list[str]]:
    """A guide after `pieces` (each a token of VOCAB, or a string of one-character tokens), and the tokens its
    next row allows."""
    build, _, _ = BACKENDS[backend_name]
    backend = build(VOCAB, len(VOCAB), [EOS])
    grammar = backend.compile(constraint)
    matcher = backend.matcher(grammar, frozenset([EOS]))
    vocab = ItemVocab([token.encode() for token in VOCAB], items)
    guide = Guide(matcher, items=ItemBudget(vocab, max_tokens, frozenset([EOS])))
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


STRICT = {
    "type": "function",
    "function": {
        "name": "f",
        "strict": True,
        "parameters": {"type": "object", "properties": {"a": {"enum": ["x"]}}, "required": ["a"]},
    },
}
CALL = '<tool_call>{"name": "f", "arguments": {"a": "x"}}</tool_call>'  # one token a character


def tagged(max_tokens: int, *pieces: str, answer: dict | None = None) -> tuple[Guide, list[str]]:
    """`walk` under render's structural tag for strict tools under auto with parallel calls, and its `items`."""
    tag = strict_auto_tag([STRICT], HERMES, True, answer)
    constraint = Constraint("structural_tag", json.dumps(tag), any_whitespace=False)
    items = ItemList(b"", (CALL[0] if answer is None else CALLS_SEPARATOR).encode())
    return walk("xgrammar", max_tokens, *pieces, constraint=constraint, items=items)


def test_among_free_text_no_call_opens_that_the_tokens_left_cannot_hold():
    """No end (the output's stop ends it), separators "<": a call runs from its `<` to its tag's close (the
    prose before it is no item); where the output may stop with fewer tokens left than such a call and a stop
    token, the text may go on or stop but no token holding "<" follows."""
    used = len("Hi ") + len(CALL) + 1
    guide, allowed = tagged(used + len(CALL) + 1, "Hi ", CALL, "\n")
    assert guide.items is not None and guide.items.longest == len(CALL) and guide.items.at_end
    assert "<" in allowed and ">\n<" in allowed
    _, allowed = tagged(used + len(CALL), "Hi ", CALL, "\n")
    assert "<" not in allowed and ">\n<" not in allowed and {"</s>", "a", ">"} <= set(allowed)
    # `>\n<` closes the call and opens the next: held by the item it closes (the first's own length)
    inside = len("Hi ") + len(CALL) - 1
    _, allowed = tagged(inside + 1 + len(CALL) + 1, "Hi ", CALL[:-1])
    assert allowed == [">", ">\n<"]
    _, allowed = tagged(inside + len(CALL) + 1, "Hi ", CALL[:-1])
    assert allowed == [">"]


def test_calls_after_an_answer_format_end_with_the_output_when_another_cannot_fit():
    """The answer-or-calls form: calls joined by "\n" (the separator); short of tokens, only the stop follows."""
    answer = {"type": "json_schema", "json_schema": {"type": "integer"}}
    guide, allowed = tagged(2 * len(CALL) + 1, CALL, answer=answer)
    assert guide.items is not None and guide.items.longest == len(CALL) and allowed == ["</s>", "\n"]
    _, allowed = tagged(2 * len(CALL), CALL, answer=answer)
    assert allowed == ["</s>"]


@pytest.fixture
def vocab_builds(monkeypatch) -> list[str]:
    """The names of the threads that build an `ItemVocab` through the compiler."""
    names: list[str] = []

    class Recorded(ItemVocab):
        def __init__(self, texts, items):
            names.append(threading.current_thread().name)
            super().__init__(texts, items)

    monkeypatch.setattr(compiler_module, "ItemVocab", Recorded)
    return names


def test_a_lists_vocabulary_is_ready_once_its_grammar_is(vocab_builds):
    """Built on the compile pool beside the grammar, kept per list form: a cached grammar under another form still
    waits for that form's vocabulary."""
    compiler = GrammarCompiler(XGrammarBackend.from_vocab(VOCAB, len(VOCAB), [EOS]), "tiny")  # type: ignore[arg-type]
    try:
        for form in (ITEMS, ItemList(b"]", b", "), ITEMS):
            compiler.get(Constraint("json_schema", json.dumps(LIST), any_whitespace=False, items=form)).result(30)
            vocab = compiler.item_vocab(form)
            assert vocab.done() and vocab.result().end == b"]"
    finally:
        compiler.close()
    assert compiler.stats.misses == 1 and len(vocab_builds) == 2, vocab_builds
    assert all(name.startswith("grammar-compile") for name in vocab_builds), vocab_builds


async def test_forced_lists_end_whole_under_max_tokens(vocab_builds):
    """The tiny random model on a list of fixed-size items: with `items` every output ends with the list's end
    and a stop token; without, some open an item the length cut leaves open. An `items` with neither end nor
    separators is refused, naming it."""
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
        bad.sampling_params.structured_outputs.items.SetInParent()  # neither end nor separators
        error = await refused(stub, bad)
        assert (
            error.reason == Reason.INVALID_GRAMMAR
            and error.violations[0][0] == "sampling_params.structured_outputs.items"
        )
    for messages, tokens in held:
        assert finish(messages) == common_pb2.FINISH_REASON_STOP, text(tokens[0])
        assert tokens[0][-1] == TINY_EOS and json.loads(text(tokens[0]))
    assert any(finish(messages) == common_pb2.FINISH_REASON_LENGTH for messages, _ in free)
    (builder,) = vocab_builds  # once, off the step loop
    assert builder.startswith("grammar-compile"), builder
