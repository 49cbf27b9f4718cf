"""The one rule that picks a grammar backend per constraint: xgrammar where our lowering accepts the schema (it
enforces all of it, json_schema.py), else llguidance where it compiles the schema in strict mode (it enforces
all of it or errors, llguidance_backend.py), else refused with INVALID_GRAMMAR naming the lowering's path and
keyword and llguidance's reason. Regexes, grammars, choices and structural tags stay on xgrammar; a schema that
is not valid 2020-12, or whose xgrammar compile ran past the bound, is not retried.

Both backends write the same bitmask layout (int32 words over the tokenizer's ids), so one step's rows mix
matchers of either kind and xgrammar's kernel applies the mask.
"""

from __future__ import annotations

from engine_svc.structured.backend import GrammarError
from engine_svc.structured.json_schema import InvalidSchema
from engine_svc.structured.llguidance_backend import LLGuidanceBackend, LLGuidanceGrammar
from engine_svc.structured.spec import Constraint
from engine_svc.structured.xgrammar_backend import XGrammarBackend


class DualBackend:
    name = "xgrammar+llguidance"

    def __init__(self, xgrammar: XGrammarBackend, llguidance: LLGuidanceBackend):
        if llguidance.words != xgrammar.words:
            raise ValueError(f"the backends' vocabularies differ: {xgrammar.words} and {llguidance.words} ids")
        self.xgrammar, self.llguidance = xgrammar, llguidance
        self.vocab_size, self.words = xgrammar.vocab_size, xgrammar.words
        # the mask's allocation, application and warm-up are xgrammar's (the layouts are the same)
        self.allocate_bitmask, self.apply_bitmask = xgrammar.allocate_bitmask, xgrammar.apply_bitmask
        self.warm_up, self.token_bytes = xgrammar.warm_up, xgrammar.token_bytes

    @classmethod
    def from_hf(cls, tokenizer, vocab_size: int, threads: int = 2) -> DualBackend:
        xgrammar = XGrammarBackend.from_hf(tokenizer, vocab_size, threads)
        return cls(xgrammar, LLGuidanceBackend.from_hf(tokenizer, xgrammar.words, vocab_size))

    @classmethod
    def from_vocab(cls, tokens: list[str], vocab_size: int, stop_token_ids: list[int], threads: int = 1):
        xgrammar = XGrammarBackend.from_vocab(tokens, vocab_size, stop_token_ids, threads)
        return cls(xgrammar, LLGuidanceBackend.from_vocab(tokens[: xgrammar.words], vocab_size, stop_token_ids))

    def compile(self, constraint: Constraint):
        try:
            return self.xgrammar.compile(constraint)
        except InvalidSchema:
            raise
        except GrammarError as refused:
            if constraint.kind != "json_schema":
                raise
            try:
                return self.llguidance.compile(constraint)
            except GrammarError as also:
                raise GrammarError(f"{refused} ({also})") from None

    def backend_of(self, grammar):
        return self.llguidance if isinstance(grammar, LLGuidanceGrammar) else self.xgrammar

    def matcher(self, grammar, stop_token_ids: frozenset[int]):
        return self.backend_of(grammar).matcher(grammar, stop_token_ids)

    def fill_rows(self, matchers, bitmask, rows: list[int]) -> None:
        for matcher, row in zip(matchers, rows):
            matcher.fill(bitmask, row)
