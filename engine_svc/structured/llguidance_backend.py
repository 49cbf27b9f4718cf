"""JSON schemas on llguidance (what the paper's coverage leader, Guidance, runs): the schemas our xgrammar lowering
refuses, compiled in llguidance's strict mode (dual_backend.py picks per schema).

Strict, per llguidance's docs/json_schema.md and checked against 1.7.6: keywords it does not implement (`not`,
`uniqueItems`, `if`, `contains`, `dependencies`, `propertyNames`, ...) and formats it does not know are errors, not
dropped; `oneOf` compiles only where llguidance proves the branches disjoint (`coerce_one_of` off), else it is
retried with each overlapping `oneOf` as "one branch and not the others" where that is exact (rewrite.exclusive); sibling keywords
beside `anyOf`/`allOf`/`$ref` are intersected; `pattern` beside `minLength`/`maxLength` is intersected. `lenient`
and `coerce_one_of` are forced off over whatever the schema's own `x-guidance` says. Before compiling, the schema is
rewritten where an exact rewrite exists (rewrite.py), and `format`s no validator checks (`int64`, `made-up`) are
dropped as the annotations they are; `date`, `time`,
`date-time`, `ipv4`, `ipv6` and `hostname` become strings.py's patterns and `uri-reference`, `iri`,
`iri-reference`, `idn-email` the `uri` / `email` they contain (llguidance's own formats admit what
validators refuse: year 0000, second 60), as they do for xgrammar. llguidance does not keep names written under
`additionalProperties` / `patternProperties` unique (documented): a `minProperties` they must make up is refused,
as is a `multipleOf` that is not whole (validators divide in floating point; xgrammar's lowering refuses it too).
Unlike xgrammar's strict mode, objects keep JSON Schema's default (`additionalProperties` true) where unstated.

Matchers stop on the request's stop ids, not the tokenizer's EOS: the mask llguidance writes has its EOS bit
cleared and the stop ids set while the grammar is complete.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import llguidance
import llguidance.hf
import torch

from engine_svc.structured import rewrite, unique
from engine_svc.structured.backend import GrammarError
from engine_svc.structured.guide import allow, disallow
from engine_svc.structured.spec import Constraint
from engine_svc.structured.strings import CHECKED_FORMATS, NARROWER, PATTERNS

_NARROWER = {**NARROWER, "uri-reference": "uri"}  # (llguidance knows no uri-reference: every URI is one)


def prepare(node: Any) -> Any:
    """`node` (a schema) as llguidance must see it: exact rewrites (rewrite.py), and without the `format`s
    validators do not check, in every subschema (a copy)."""
    out = _drop_annotations(unique.hold(rewrite.exact(node)))
    _check_departures(out, "#")
    return out


def _check_departures(node: Any, path: str) -> None:
    """Where llguidance's outputs may fail a validator, refused: a `minProperties` that needs two or more names under
    `additionalProperties` / `patternProperties` (llguidance may write one twice, a parser keeps one),
    and a `multipleOf` that is not whole (validators divide in floating point: 64.91 is no multiple of 0.01)."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            _check_departures(item, f"{path}/{i}")
        return
    if not isinstance(node, dict):
        return
    listed = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    required = {n for n in node.get("required", []) if n in listed} if isinstance(node.get("required"), list) else set()
    open_ = node.get("additionalProperties", True) is not False or "patternProperties" in node
    # the required names are written once each; the rest may all be one name written again and again
    if open_ and isinstance(node.get("minProperties"), int) and node["minProperties"] > len(required) + 1:
        raise GrammarError(f"{path}: minProperties beyond the required properties (llguidance may repeat a name)")
    step = node.get("multipleOf")
    if isinstance(step, (int, float)) and not float(step).is_integer():
        raise GrammarError(f"{path}: multipleOf {step} (not whole: validators check it in floating point)")
    for key in rewrite.MAPS:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                _check_departures(sub, f"{path}/{key}/{name}")
    for key in rewrite.SUBSCHEMAS:
        if isinstance(node.get(key), (dict, list)):
            _check_departures(node[key], f"{path}/{key}")


def _drop_annotations(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    out = rewrite.subschemas(node, _drop_annotations)
    fmt = out.get("format")
    if not isinstance(fmt, str):
        return out
    if fmt not in CHECKED_FORMATS:
        del out["format"]
        return out
    fmt = out["format"] = _NARROWER.get(fmt, fmt)  # formats llguidance does not know: one they contain
    if fmt in PATTERNS:  # llguidance's own admit what validators refuse (0000-01-01, 10:00:60)
        del out["format"]
        if "pattern" in out:
            out["allOf"] = [*out.get("allOf", []), {"pattern": PATTERNS[fmt]}]
        else:
            out["pattern"] = PATTERNS[fmt]
    return out


def _grammar(schema: Any, options: Any) -> str:
    try:
        return llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=options)
    except (ValueError, TypeError) as error:
        raise GrammarError(f"llguidance: {_first_line(str(error))}") from None


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or ["error"])[0][:300]


@dataclass(frozen=True)
class LLGuidanceGrammar:
    grammar: str  # llguidance's serialized grammar
    prototype: llguidance.LLMatcher  # built once (the compile); each output's matcher is a copy

    @property
    def memory_size_bytes(self) -> int:
        return 4 * len(self.grammar)  # an estimate: llguidance does not report its size


class LLGuidanceMatcher:
    __slots__ = ("done", "eos", "inner", "stops", "tokenizer")

    def __init__(
        self,
        inner: llguidance.LLMatcher,
        stops: frozenset[int],
        eos: tuple[int, ...],
        tokenizer: llguidance.LLTokenizer,
    ):
        self.inner, self.stops, self.eos, self.tokenizer = inner, stops, eos, tokenizer
        self.done = False  # took a stop id

    def accept(self, token: int) -> bool:
        if self.done:
            return False
        if token in self.stops:
            self.done = self.inner.is_accepting()
            return self.done
        if token in self.eos or self.inner.validate_tokens([token]) != 1:
            return False  # checked first: a refused token would leave llguidance's matcher in its error state
        return self.inner.consume_token(token)

    def fill(self, bitmask: torch.Tensor, row: int) -> None:
        if self.done:
            bitmask[row].zero_()
            return
        # imported here: importing llguidance.torch compiles a kernel we do not use (~2 s of every engine start)
        from llguidance.torch import fill_next_token_bitmask

        fill_next_token_bitmask(self.inner, bitmask, row)
        disallow(bitmask, row, self.eos)  # llguidance's EOS: the request's stop ids stand for it
        if self.stops and self.inner.is_accepting():
            allow(bitmask, row, self.stops)

    def is_terminated(self) -> bool:
        return self.done or (not self.stops and self.inner.is_stopped())

    def fork(self) -> LLGuidanceMatcher:
        fork = LLGuidanceMatcher(self.inner.deep_copy(), self.stops, self.eos, self.tokenizer)
        fork.done = self.done
        return fork

    def accept_bytes(self, data: bytes) -> bool:
        # llguidance lexes bytes, so any tokenization of the text is accepted alike
        tokens = self.tokenizer.tokenize_bytes(data)
        if self.done or self.inner.validate_tokens(tokens) != len(tokens):
            return False
        return self.inner.consume_tokens(tokens)

    def is_completed(self) -> bool:
        return not self.done and self.inner.is_accepting()


class LLGuidanceBackend:
    """JSON schemas on llguidance for one tokenizer; masks share xgrammar's layout (int32 words over `words` ids)."""

    name = "llguidance"

    def __init__(self, tokenizer: llguidance.LLTokenizer, vocab_size: int):
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.words = tokenizer.vocab_size
        self.eos = tuple(tokenizer.eos_tokens)

    @classmethod
    def from_hf(cls, tokenizer, words: int, vocab_size: int) -> LLGuidanceBackend:
        """`words`: the tokenizer's ids the masks cover (as xgrammar's); `vocab_size`: the logits' width."""
        return cls(llguidance.hf.from_tokenizer(tokenizer, n_vocab=words), vocab_size)

    @classmethod
    def from_vocab(cls, tokens: list[str], vocab_size: int, stop_token_ids: list[int]) -> LLGuidanceBackend:
        """For a plain vocabulary: token i is the text tokens[i] (tests' tiny models); stop ids are special."""
        return cls(llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Vocab(tokens, stop_token_ids))), vocab_size)

    def compile(self, constraint: Constraint) -> LLGuidanceGrammar:
        if constraint.kind != "json_schema":
            raise GrammarError(f"llguidance takes JSON schemas here, not a {constraint.kind}")
        options: Any = {"lenient": False, "coerce_one_of": False, "whitespace_flexible": constraint.any_whitespace}
        if not constraint.any_whitespace:
            options |= {"item_separator": ",", "key_separator": ":"}
        try:
            schema = prepare(json.loads(constraint.text))
        except (ValueError, TypeError) as error:
            raise GrammarError(f"llguidance: {_first_line(str(error))}") from None
        try:
            grammar = _grammar(schema, options)
        except GrammarError as error:
            if "oneOf" not in str(error):
                raise
            grammar = _grammar(rewrite.without_one_of(schema), options)  # overlapping branches, made exclusive
        prototype = llguidance.LLMatcher(self.tokenizer, grammar, log_level=0)
        if prototype.is_error():
            raise GrammarError(f"llguidance: {_first_line(prototype.get_error())}")
        return LLGuidanceGrammar(grammar, prototype)

    def matcher(self, grammar: LLGuidanceGrammar, stop_token_ids: frozenset[int]) -> LLGuidanceMatcher:
        return LLGuidanceMatcher(grammar.prototype.deep_copy(), frozenset(stop_token_ids), self.eos, self.tokenizer)


class _Vocab:
    """What llguidance.TokenizerWrapper reads from a tokenizer, for a plain vocabulary (tests' tiny models)."""

    def __init__(self, tokens: list[str], stops: list[int]):
        self.tokens = [t.encode() for t in tokens]
        self.eos_token_id, self.bos_token_id, self.special_token_ids = stops[0], None, list(stops)
        self._ids = {t: i for i, t in enumerate(self.tokens) if i not in stops}

    def __call__(self, text: bytes | str) -> list[int]:  # greedy, one byte-string token at a time
        data = text.encode() if isinstance(text, str) else text
        out, i = [], 0
        while i < len(data):
            size = next(n for n in range(min(8, len(data) - i), 0, -1) if data[i : i + n] in self._ids)
            out.append(self._ids[data[i : i + size]])
            i += size
        return out
