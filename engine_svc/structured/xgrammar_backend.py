"""The grammar backend on xgrammar (what vLLM and SGLang use by default): JSON Schema, regex, EBNF/Lark,
choices and structural tags compiled against the tokenizer's vocabulary; matchers advance in C++ and fill a
row's bitmask in microseconds; masks are applied by xgrammar's kernels (CPU, Triton on CUDA).

JSON schemas compile in strict mode (as vLLM's xgrammar backend does): `additionalProperties` and `items`
default to false where a schema leaves them out, so outputs hold only what the schema lists. Keywords xgrammar
would accept but not enforce are refused (INVALID_GRAMMAR) rather than silently dropped: `not`,
`if`/`then`/`else`, `dependentRequired`/`dependentSchemas`/`dependencies`, `uniqueItems: true`, `allOf` with
more than one subschema, string `format`s other than those it knows, and `minLength`/`maxLength` beside a
`pattern` (xgrammar would drop the lengths). `oneOf` is enforced as `anyOf`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any, Literal

import torch
import xgrammar as xgr

from engine_svc.structured import lark
from engine_svc.structured.backend import GrammarError
from engine_svc.structured.spec import Constraint

# String formats xgrammar enforces (vLLM's list for its xgrammar backend).
FORMATS = frozenset(
    {
        "email",
        "date",
        "time",
        "date-time",
        "duration",
        "ipv4",
        "ipv6",
        "hostname",
        "uuid",
        "uri",
        "uri-reference",
        "uri-template",
        "json-pointer",
        "relative-json-pointer",
    }
)
UNENFORCED = ("not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies")
# Nested schemas, by the keyword that holds them: one schema, a list of them, or a map of them.
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "additionalItems")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
log = logging.getLogger(__name__)

_CPP_NOISE = re.compile(r"\[\d\d:\d\d:\d\d\] \S+:\d+: (Check failed: \(.*?\) is false: )?")


def _walk(schema: Any, path: str = "#") -> Iterator[tuple[str, dict]]:
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in _ONE:
        if isinstance(schema.get(key), dict):
            yield from _walk(schema[key], f"{path}/{key}")
    for key in _MANY:
        if isinstance(schema.get(key), list):
            for i, item in enumerate(schema[key]):
                yield from _walk(item, f"{path}/{key}/{i}")
    for key in _MAP:
        if isinstance(schema.get(key), dict):
            for name, item in schema[key].items():
                yield from _walk(item, f"{path}/{key}/{name}")


def unenforced_keywords(schema: Any) -> list[str]:
    """Where `schema` uses what xgrammar would not enforce ("#/properties/x: uniqueItems", ...)."""
    found = []
    for path, node in _walk(schema):
        found += [f"{path}: {key}" for key in UNENFORCED if key in node]
        if node.get("uniqueItems") is True:
            found.append(f"{path}: uniqueItems")
        if isinstance(node.get("allOf"), list) and len(node["allOf"]) > 1:
            found.append(f"{path}: allOf with {len(node['allOf'])} subschemas")
        if isinstance(node.get("format"), str) and node["format"] not in FORMATS:
            found.append(f"{path}: format {node['format']!r}")
        if "pattern" in node and ("minLength" in node or "maxLength" in node):
            found.append(f"{path}: minLength/maxLength together with pattern (bound the length in the pattern)")
    return found


def tag_schemas(node: Any) -> Iterator[Any]:
    """The JSON schemas a structural tag holds (its `json_schema` formats; the first format's `schema`s)."""
    if isinstance(node, list):
        for item in node:
            yield from tag_schemas(item)
    elif isinstance(node, dict):
        if node.get("type") == "json_schema" and "json_schema" in node:
            yield node["json_schema"]
            return
        if "begin" in node and "schema" in node:
            yield node["schema"]
            return
        for value in node.values():
            yield from tag_schemas(value)


def _literal(text: str) -> str:
    """An EBNF string literal (xgrammar takes JSON-style escapes)."""
    return json.dumps(text, ensure_ascii=False)


def choice_grammar(options: list[str]) -> str:
    return "root ::= " + " | ".join(_literal(option) for option in options)


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
        if kind == "json_schema":
            self._check_schemas([json.loads(text)])
            return compiler.compile_json_schema(text, any_whitespace=constraint.any_whitespace, strict_mode=True)
        if kind == "json_object":
            return compiler.compile_json_schema('{"type": "object"}', any_whitespace=constraint.any_whitespace)
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
            self._check_schemas(tag_schemas(tag))
            if "structures" in tag:  # the first (vLLM <= 0.10) format: begin / schema / end items and triggers
                items = [
                    xgr.StructuralTagItem(begin=s["begin"], schema=json.dumps(s["schema"]), end=s["end"])
                    for s in tag["structures"]
                ]
                return compiler.compile_structural_tag(items, tag.get("triggers", []))
            return compiler.compile_structural_tag(text)
        raise GrammarError(f"unknown constraint kind {kind!r}")

    def _check_schemas(self, schemas) -> None:
        bad = [found for schema in schemas for found in unenforced_keywords(schema)]
        if bad:
            raise GrammarError(f"the schema uses keywords {self.name} cannot enforce: {'; '.join(bad[:5])}")

    def matcher(self, grammar, stop_token_ids: frozenset[int]) -> _XGrammarMatcher:
        stops = sorted(stop_token_ids)
        return _XGrammarMatcher(
            xgr.GrammarMatcher(grammar, override_stop_tokens=stops or None, terminate_without_stop_token=not stops)
        )

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
