"""The grammar backend on xgrammar (what vLLM and SGLang use by default): JSON Schema, regex, EBNF/Lark,
choices and structural tags compiled against the tokenizer's vocabulary; matchers advance in C++ and fill a
row's bitmask in microseconds; masks are applied by xgrammar's kernels (CPU, Triton on CUDA).

JSON schemas compile in strict mode (as vLLM's xgrammar backend does): `additionalProperties` and `items`
default to false where a schema leaves them out, so outputs hold only what the schema lists. Every schema
(alone or inside a structural tag) is first lowered by json_schema.py into nodes xgrammar enforces in full, or
refused (INVALID_GRAMMAR naming the path and keyword): xgrammar alone would drop what it cannot build.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Literal

import torch
import xgrammar as xgr

from engine_svc.structured import json_schema, lark
from engine_svc.structured.backend import GrammarError
from engine_svc.structured.spec import Constraint

log = logging.getLogger(__name__)

_CPP_NOISE = re.compile(r"\[\d\d:\d\d:\d\d\] \S+:\d+: (Check failed: \(.*?\) is false: )?")


def lower_tag(node: Any, compact: bool) -> None:
    """The JSON schemas a structural tag holds (its `json_schema` formats; the first format's `schema`s),
    lowered in place. `compact`: at most one whitespace character between tokens (xgrammar's structural tags
    cannot forbid it)."""
    if isinstance(node, list):
        for item in node:
            lower_tag(item, compact)
    elif isinstance(node, dict):
        if node.get("type") == "json_schema" and "json_schema" in node:
            node["json_schema"] = json_schema.lower(node["json_schema"])
            if compact:
                node.setdefault("max_whitespace_cnt", 1)
        elif "begin" in node and "schema" in node:
            node["schema"] = json_schema.lower(node["schema"])
        else:
            for value in node.values():
                lower_tag(value, compact)


def _literal(text: str) -> str:
    """An EBNF string literal (xgrammar takes JSON-style escapes)."""
    return json.dumps(text, ensure_ascii=False)


def choice_grammar(options: list[str]) -> str:
    return "root ::= " + " | ".join(_literal(option) for option in options)


# xgrammar 0.2.9 writes a length-bounded string's characters as [^"\\\r\n]: raw tabs and other control
# characters, which JSON forbids inside strings (its other string rules exclude \0-\x1f). The EBNF it prints
# is recompiled with the class JSON allows.
_LOOSE_CHARS, _JSON_CHARS = r"[^\"\\\r\n]", r"[^\0-\x1f\"\\]"


def _json_strings(grammar: xgr.Grammar) -> str:
    return str(grammar).replace(_LOOSE_CHARS, _JSON_CHARS)


def _clean(error: Exception) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    text = lines[-1] if lines else type(error).__name__
    return _CPP_NOISE.sub("", text).strip()[:500]


class _XGrammarMatcher:
    __slots__ = ("inner",)

    def __init__(self, matcher: xgr.GrammarMatcher):
        self.inner = matcher

    def accept(self, token: int) -> bool:
        return self.inner.accept_token(token)

    def fill(self, bitmask: torch.Tensor, row: int) -> None:
        self.inner.fill_next_token_bitmask(bitmask, row)

    def is_terminated(self) -> bool:
        return self.inner.is_terminated()

    def fork(self) -> _XGrammarMatcher:
        return _XGrammarMatcher(self.inner.fork())

    def accept_bytes(self, data: bytes) -> bool:
        return self.inner.accept_string(data)

    def is_completed(self) -> bool:
        return self.inner.is_completed()


class XGrammarBackend:
    """A `GrammarBackend` for one tokenizer.

    Grammars cover the tokenizer's ids only; a model's logits may be wider (a vocabulary padded for its
    kernels), and those columns are masked apart. xgrammar would treat every padded id as a special token,
    which its matchers check on each accepted token: 79k padded ids (the default tokenizer under a 128k
    vocabulary) made accepting a token 30x slower."""

    name = "xgrammar"

    def __init__(self, info: xgr.TokenizerInfo, vocab_size: int, threads: int = 2):
        self.info = info
        self.vocab_size = vocab_size  # the logits' width
        self.words = info.vocab_size  # the tokenizer's ids: what the grammar masks
        # Our cache (compiler.py) keys compiled grammars by constraint and tokenizer; xgrammar's would double it.
        self._compiler = xgr.GrammarCompiler(info, max_threads=threads, cache_enabled=False)
        # xgrammar's pick (Triton on CUDA); warm_up() falls back to its plain torch ops
        self.apply_kernel: Literal["auto", "torch_native"] = "auto"
        self._token_bytes: list[bytes] | None = None

    @classmethod
    def from_hf(cls, tokenizer, vocab_size: int, threads: int = 2) -> XGrammarBackend:
        """For a transformers tokenizer; `vocab_size` is the model's (its logits may be wider than the vocab)."""
        words = min(vocab_size, max(tokenizer.get_vocab().values()) + 1)
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=words)
        return cls(info, vocab_size, threads)

    @classmethod
    def from_vocab(cls, tokens: list[str], vocab_size: int, stop_token_ids: list[int], threads: int = 1):
        """For a plain vocabulary: token i is the text tokens[i] (tests' tiny models)."""
        words = min(vocab_size, len(tokens))
        info = xgr.TokenizerInfo(tokens[:words], xgr.VocabType.RAW, vocab_size=words, stop_token_ids=stop_token_ids)
        return cls(info, vocab_size, threads)

    def compile(self, constraint: Constraint):
        try:
            return self._compile(constraint)
        except GrammarError:
            raise
        except (RuntimeError, ValueError, TypeError, xgr.InvalidJSONError, xgr.InvalidStructuralTagError) as error:
            raise GrammarError(f"the {constraint.kind} does not compile: {_clean(error)}") from None

    def _compile(self, constraint: Constraint):
        kind, text, compiler = constraint.kind, constraint.text, self._compiler
        if kind in ("json_schema", "json_object"):
            lowered = json_schema.lower_text(text) if kind == "json_schema" else '{"type": "object"}'
            grammar = xgr.Grammar.from_json_schema(lowered, any_whitespace=constraint.any_whitespace, strict_mode=True)
            return compiler.compile_grammar(_json_strings(grammar))
        if kind == "regex":
            return compiler.compile_regex(text)
        if kind == "choice":
            return compiler.compile_grammar(choice_grammar(json.loads(text)))
        if kind == "grammar":
            if lark.is_lark(text):
                try:
                    text = lark.to_ebnf(text)
                except ValueError as error:
                    raise GrammarError(f"the Lark grammar does not convert to EBNF: {error}") from None
            return compiler.compile_grammar(text)
        if kind == "structural_tag":
            tag = json.loads(text)
            lower_tag(tag, not constraint.any_whitespace)
            if "structures" in tag:  # the first (vLLM <= 0.10) format: begin / schema / end items and triggers
                items = [
                    xgr.StructuralTagItem(begin=s["begin"], schema=json.dumps(s["schema"]), end=s["end"])
                    for s in tag["structures"]
                ]
                return compiler.compile_grammar(
                    _json_strings(xgr.Grammar.from_structural_tag(items, tag.get("triggers", [])))
                )
            return compiler.compile_grammar(_json_strings(xgr.Grammar.from_structural_tag(json.dumps(tag))))
        raise GrammarError(f"unknown constraint kind {kind!r}")

    def matcher(self, grammar, stop_token_ids: frozenset[int]) -> _XGrammarMatcher:
        stops = sorted(stop_token_ids)
        return _XGrammarMatcher(
            xgr.GrammarMatcher(grammar, override_stop_tokens=stops or None, terminate_without_stop_token=not stops)
        )

    def token_bytes(self) -> list[bytes]:
        if self._token_bytes is None:
            self._token_bytes = [bytes(text) for text in self.info.decoded_vocab[: self.words]]
        return self._token_bytes

    def fill_rows(self, matchers: list[_XGrammarMatcher], bitmask: torch.Tensor, rows: list[int]) -> None:
        # One row after another: xgrammar's batch fill on 2-8 threads took 3-7x longer for 64 rows, on this
        # 2-core machine and on an H200's 16-core host alike (bench/structured: "one step's grammar work").
        for matcher, row in zip(matchers, rows):
            matcher.inner.fill_next_token_bitmask(bitmask, row)

    def allocate_bitmask(self, rows: int, pin: bool) -> torch.Tensor:
        bitmask = xgr.allocate_token_bitmask(rows, self.words)
        return bitmask.pin_memory() if pin else bitmask

    def apply_bitmask(self, logits: torch.Tensor, bitmask: torch.Tensor, rows: list[int]) -> None:
        every = rows == list(range(logits.shape[0]))
        indices = None if every else rows
        xgr.apply_token_bitmask_inplace(
            logits, bitmask, vocab_size=self.words, indices=indices, backend=self.apply_kernel
        )
        if logits.shape[-1] > self.words:  # the padded columns: never a token
            padded = logits[:, self.words :]
            if every:
                padded.fill_(float("-inf"))
            else:
                padded.index_fill_(0, torch.tensor(rows, device=logits.device), float("-inf"))

    def warm_up(self, device: torch.device) -> None:
        """Apply a mask once before serving (on CUDA its kernel compiles here); if xgrammar's kernel does not
        run on this device's Triton, its plain torch implementation takes over."""
        for dtype in (torch.float32, torch.bfloat16) if device.type == "cuda" else (torch.float32,):
            logits = torch.zeros((2, self.vocab_size), dtype=dtype, device=device)
            bitmask = self.allocate_bitmask(2, pin=False).to(device)
            bitmask[1].zero_()
            try:
                self.apply_bitmask(logits, bitmask, [1])
            except Exception as error:  # a Triton too old or too new for xgrammar's kernel
                log.warning("xgrammar's mask kernel failed on %s (%s): using torch ops", device, error)
                self.apply_kernel = "torch_native"
                self.apply_bitmask(logits, bitmask, [1])
            if not (torch.isinf(logits[1]).all() and (logits[0] == 0).all()):
                raise RuntimeError(f"the grammar mask kernel is wrong on {device}")
