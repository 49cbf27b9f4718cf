"""The differential check of structured outputs: a schema is compiled by the engine's backend (the per-schema
rule of dual_backend.py: xgrammar after our lowering, else llguidance), random completions are sampled from the grammar itself (a matcher walked with random allowed tokens,
no model), and each is validated by `jsonschema` (Draft 2020-12, format checks on). An accepted schema must
never yield an invalid completion.

`tiny()` is a vocabulary of printable ASCII, a few multi-byte characters and JSON literals: compiles take
milliseconds and walks explore the grammar character by character (CI). `of_tokenizer()` walks a real
tokenizer's tokens (the bench). Walks prefer closing characters and the stop token as they grow, so most end
within `max_steps`; a walk that does not end is counted apart, never as valid.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field

import jsonschema
import numpy as np

from engine_svc.structured.backend import GrammarError
from engine_svc.structured.compiler import GrammarCompiler
from engine_svc.structured.dual_backend import DualBackend
from engine_svc.structured.spec import Constraint
from scaleout_common.errors import ServiceError

TINY = [chr(c) for c in range(32, 127)] + ["\n", "\t", "é", "ß", "中", "😀", "true", "false", "null", '":', '","']
CLOSING = ('"', "]", "}", "0", "1", "a", "null", "true")
VALIDATOR = jsonschema.Draft202012Validator


@dataclass
class Vocab:
    backend: DualBackend
    texts: list[bytes]  # each id's bytes
    stop: int
    closing: frozenset[int]  # ids that tend to end what is open


def tiny() -> Vocab:
    backend = DualBackend.from_vocab([*TINY, "</s>"], len(TINY) + 1, [len(TINY)])
    closing = frozenset(i for i, t in enumerate(TINY) if t in CLOSING)
    return Vocab(backend, [t.encode() for t in TINY], len(TINY), closing)


def of_tokenizer(tokenizer) -> Vocab:
    backend = DualBackend.from_hf(tokenizer, len(tokenizer))
    texts = [bytes(t) if isinstance(t, bytes) else t.encode() for t in backend.xgrammar.info.decoded_vocab]
    closing = frozenset(i for i, t in enumerate(texts) if t.decode(errors="ignore").strip() in CLOSING)
    return Vocab(backend, texts, tokenizer.eos_token_id, closing)


@dataclass
class Outcome:
    accepted: bool
    reason: str = ""  # the refusal
    compile_s: float = 0.0  # cold, through the engine's compiler (lowering included)
    cached_s: float = 0.0  # the same constraint again, from the compiler's cache
    valid: int = 0
    invalid: list[str] = field(default_factory=list)  # the invalid completions
    backend: str = ""  # the backend the rule picked
    unfinished: int = 0  # walks that did not end within max_steps (or found no allowed token)


def walk(vocab: Vocab, grammar, rng: random.Random, max_steps: int) -> str | None:
    matcher = vocab.backend.matcher(grammar, frozenset({vocab.stop}))
    bitmask = vocab.backend.allocate_bitmask(1, pin=False)
    out = []
    for step in range(max_steps):
        matcher.fill(bitmask, 0)
        bits = np.unpackbits(bitmask[0].numpy().view(np.uint8), bitorder="little")
        allowed = np.flatnonzero(bits[: vocab.backend.words])
        if len(allowed) == 0:
            return None
        pressure = min(0.95, step / (max_steps / 3))
        if vocab.stop in allowed and rng.random() < 0.3 + pressure:
            return b"".join(out).decode()
        choices = [int(t) for t in allowed if t != vocab.stop]
        closing = [t for t in choices if t in vocab.closing] if rng.random() < pressure else []
        if not choices:
            return b"".join(out).decode()
        token = rng.choice(closing or choices)
        if not matcher.accept(token):
            raise AssertionError(f"the matcher refused token {token}, which it allowed")
        out.append(vocab.texts[token])
    return None


def check(vocab: Vocab, schema, samples: int, seed: int = 0, max_steps: int = 600, timeout_s: float = 10.0) -> Outcome:
    constraint = Constraint("json_schema", json.dumps(schema, ensure_ascii=False), any_whitespace=False)
    compiler = GrammarCompiler(vocab.backend, "differential", timeout_s=timeout_s, threads=1)
    try:
        start = time.perf_counter()
        try:
            grammar = compiler.get(constraint).result()
        except (ServiceError, GrammarError) as error:
            return Outcome(False, str(error), time.perf_counter() - start)
        outcome = Outcome(True, compile_s=time.perf_counter() - start, backend=vocab.backend.backend_of(grammar).name)
        start = time.perf_counter()
        compiler.get(constraint).result()
        outcome.cached_s = time.perf_counter() - start
    finally:
        compiler.close()
    validator = VALIDATOR(schema, format_checker=VALIDATOR.FORMAT_CHECKER)
    rng = random.Random(seed)
    for _ in range(samples):
        text = walk(vocab, grammar, rng, max_steps)
        if text is None:
            outcome.unfinished += 1
            continue
        try:
            valid = validator.is_valid(json.loads(text))
        except ValueError:
            valid = False
        if valid:
            outcome.valid += 1
        else:
            outcome.invalid.append(text)
    return outcome
