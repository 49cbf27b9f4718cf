"""Speculative decoding: vLLM's `--speculative-config` for method "ngram" (prompt lookup drafts) and method
"draft_model" (a small model's greedy drafts: draft_model.py).

Each step, a decoding sequence whose prompt + output ends with an n-gram (prompt_lookup_min..max tokens) seen
earlier in it gets up to k draft tokens: those that followed the earliest of the longest such matches (vLLM's
ngram_proposer); with a draft model, every decoding sequence gets k of the draft's greedy tokens. Its chunk then
runs its last token and the drafts in one forward over its paged KV (the chunked-prefill path with cached
context) and returns k + 1 logits rows.

Verification is sampling: row j is drawn by the engine's own sampler as if the first j drafts were output
already (same noise position, penalties and processors), and draft j is accepted while it equals that draw. For
a one-hot draft that is exactly rejection sampling: accept with probability p(draft), else a token from p with the
draft removed, renormalised (vLLM's rejection sampler with q = one-hot). So greedy outputs are the plain decode's,
and a seeded request draws the same tokens with or without speculation. The tokens emitted are the accepted
drafts and one more (the correction or the bonus); the rejected drafts' K/V stays in slots past num_computed (it
is overwritten later), their extra blocks go back to the pool, and only accepted tokens enter the prefix cache.

Not speculated (plain decode): guided sequences (structured outputs, thinking budgets: their masks would need the
grammar advanced over the drafts), sequences still wanting prompt logprobs, and steps whose token budget the drafts
would overrun. A sequence whose drafts do not pay (fewer than MIN_ACCEPTED accepted tokens per verify over the last
WINDOW) stops drafting for a back-off (in output tokens) that doubles each time, then tries again; a sequence with
no n-gram match costs nothing (no draft, the plain decode path and its chained steps).

Per request (vLLM's --per-request-spec-decode-metrics, `summary` or `detailed`): each sequence counts its verify
steps by drafts accepted and the drafts proposed (`detailed`: each step's, in order), reported with its finish
(`report`, engine.proto SpeculationCounts); a sequence never drafted reports zero steps.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from engine_svc.scheduling.sequence import Chunk, Sequence

KEYS = {  # by method: the keys honoured (any other is refused by name)
    "ngram": ("method", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min"),
    "draft_model": ("method", "model", "num_speculative_tokens", "draft_sample_method"),
}
WINDOW = 8  # verifies per sequence the acceptance is judged over
MIN_ACCEPTED = 0.5  # accepted tokens per verify below which drafting stops paying (its step costs more)
BACKOFF = (16, 512)  # output tokens without drafts after a failed window: first, most (doubling in between)


PER_REQUEST = ("none", "summary", "detailed")  # --per-request-spec-decode-metrics


@dataclass(slots=True)
class RequestCounts:
    """One sequence's verify steps (vLLM's RequestSpecDecodeMetrics)."""

    histogram: list[int]  # by drafts accepted j (0..k): the steps that accepted exactly j
    num_draft_tokens: int = 0
    per_step_accepted: list[int] = field(default_factory=list)  # `detailed` only
    per_step_drafted: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class SpecConfig:
    num_speculative_tokens: int
    prompt_lookup_min: int = 0
    prompt_lookup_max: int = 0
    method: str = "ngram"
    model: str = ""  # the draft model's folder or name (method "draft_model")


def parse_speculative_config(text: str) -> SpecConfig | None:
    """vLLM's --speculative-config JSON; methods "ngram" and "draft_model" and their keys (anything else is
    refused by name). As vLLM: no method but a model means "draft_model"; neither lookup bound given, both 5; one
    given, the other the same."""
    if not text:
        return None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--speculative-config is not JSON: {error}") from None
    if not isinstance(spec, dict):
        raise ValueError("--speculative-config must be a JSON object")
    method = spec.get("method")
    if method is None and spec.get("model") is not None:
        method = "draft_model"
    method = "ngram" if method == "[ngram]" else method
    if method not in KEYS:
        raise ValueError(f"--speculative-config: method {method!r} is not supported (only 'ngram', 'draft_model')")
    unknown = sorted(set(spec) - set(KEYS[method]))
    if unknown:
        supported = ", ".join(KEYS[method])
        raise ValueError(f"--speculative-config: unsupported keys {', '.join(unknown)} (supported: {supported})")
    k = spec.get("num_speculative_tokens")
    if method == "draft_model":
        return _draft_model_config(spec, k)
    lo, hi = spec.get("prompt_lookup_min"), spec.get("prompt_lookup_max")
    lo, hi = (5, 5) if lo is None and hi is None else (lo or hi, hi or lo)
    for name, value in (("num_speculative_tokens", k), ("prompt_lookup_min", lo), ("prompt_lookup_max", hi)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"--speculative-config: {name} must be an integer >= 1, not {value!r}")
    assert isinstance(k, int) and isinstance(lo, int) and isinstance(hi, int)  # checked just above
    if lo > hi:
        raise ValueError(f"--speculative-config: prompt_lookup_min={lo} must be <= prompt_lookup_max={hi}")
    return SpecConfig(k, lo, hi)


def _draft_model_config(spec: dict, k) -> SpecConfig:
    model, sample = spec.get("model"), spec.get("draft_sample_method", "greedy")
    if not isinstance(model, str) or not model:
        raise ValueError("--speculative-config: method 'draft_model' needs a model (the draft's folder or name)")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"--speculative-config: num_speculative_tokens must be an integer >= 1, not {k!r}")
    if sample != "greedy":
        raise ValueError(f"--speculative-config: draft_sample_method {sample!r} is not supported (only 'greedy')")
    return SpecConfig(k, method="draft_model", model=model)


def propose(tokens: np.ndarray, k: int, min_n: int, max_n: int) -> list[int]:
    """Up to `k` tokens following the earliest of the longest n-grams (min_n <= n <= max_n) that end `tokens` and
    occur earlier in it (vLLM's _find_longest_matched_ngram_and_propose_tokens)."""
    total = len(tokens)
    if total < min_n + 1 or k <= 0:
        return []
    # match[e]: the n-gram ending at e (e < total - 1) equals the last n tokens, for growing n
    match = tokens[:-1] == tokens[-1]
    best = None
    for n in range(1, min(max_n, total - 1) + 1):
        if n > 1:
            match = match[1:] & (tokens[: total - n] == tokens[total - n])  # ends e >= n - 1, shifted
        hits = np.flatnonzero(match)
        if hits.size == 0:
            break
        if n >= min_n:
            best = int(hits[0]) + n  # the earliest match's continuation, in `tokens`
    if best is None:
        return []
    return tokens[best : best + k].tolist()


@dataclass
class _Drafting:
    """One sequence's drafting state: its tokens as an array (appended as it grows), its recent acceptance."""

    buf: np.ndarray = field(default_factory=lambda: np.zeros(256, dtype=np.int64))
    size: int = 0
    accepted: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    resume_at: int = 0  # output length from which it drafts again
    backoff: int = BACKOFF[0]

    def tokens(self, seq: Sequence) -> np.ndarray:
        n = seq.num_tokens
        if n > len(self.buf):
            self.buf = np.resize(self.buf, max(n, 2 * len(self.buf)))
        if n > self.size:
            self.buf[self.size : n] = seq.tokens(self.size, n)
            self.size = n
        return self.buf[:n]

    def judge(self, accepted: int, output_len: int) -> None:
        self.accepted.append(accepted)
        if len(self.accepted) == WINDOW and sum(self.accepted) < MIN_ACCEPTED * WINDOW:
            self.resume_at, self.backoff = output_len + self.backoff, min(2 * self.backoff, BACKOFF[1])
            self.accepted.clear()


@dataclass
class DraftRow:
    """A sequence as the sampler sees it at a draft position: its output as if the drafts before were accepted."""

    config: object
    index: int
    prompt_ids: list[int]
    output_ids: list[int]


class Speculator:
    """Drafts for a step's decodes and verifies them (step thread only); counts what vLLM's spec_decode metrics
    count. `drafter`: a DraftModel (method "draft_model"), else drafts are n-gram lookups."""

    def __init__(self, config: SpecConfig, max_model_len: int, drafter=None, per_request: str = "none"):
        self.config = config
        self.per_request = per_request  # --per-request-spec-decode-metrics
        self.max_model_len = max_model_len
        self.drafter = drafter
        self.states: dict[Sequence, _Drafting] = {}
        self.num_drafts = 0  # verifies
        self.num_draft_tokens = 0
        self.num_accepted_tokens = 0
        self.accepted_per_pos = [0] * config.num_speculative_tokens

    def counters(self) -> dict:
        """The GetLoad fields of the counts (vLLM's spec_decode series read them; any thread)."""
        return {
            "spec_decode_num_drafts": self.num_drafts,
            "spec_decode_num_draft_tokens": self.num_draft_tokens,
            "spec_decode_num_accepted_tokens": self.num_accepted_tokens,
            "spec_decode_num_accepted_tokens_per_pos": list(self.accepted_per_pos),
        }

    def report(self, seq: Sequence) -> tuple | None:
        """A finished sequence's counts as its final ChoiceDelta carries them (plain, for the core's pipe):
        (histogram, drafts proposed, k, per-step accepted, per-step drafted); None unless asked per request."""
        if self.per_request == "none":
            return None
        k = self.config.num_speculative_tokens
        counts = seq.speculation if isinstance(seq.speculation, RequestCounts) else RequestCounts([0] * (k + 1))
        return counts.histogram, counts.num_draft_tokens, k, counts.per_step_accepted, counts.per_step_drafted

    def _observe(self, seq: Sequence, drafted: int, accepted: int) -> None:
        counts = seq.speculation
        if not isinstance(counts, RequestCounts):
            counts = seq.speculation = RequestCounts([0] * (self.config.num_speculative_tokens + 1))
        counts.histogram[accepted] += 1
        counts.num_draft_tokens += drafted
        if self.per_request == "detailed":
            counts.per_step_accepted.append(accepted)
            counts.per_step_drafted.append(drafted)

    def forget(self, seq: Sequence) -> None:
        self.states.pop(seq, None)
        if self.drafter is not None:
            self.drafter.forget(seq)

    def draft(self, chunks: list[Chunk], scheduler, guided) -> list[Chunk]:
        """Give the step's eligible decodes their drafts, in place: each becomes a chunk of 1 + k tokens with the
        drafts appended to its output until `verify`. Returns the drafted chunks (in step order)."""
        room = scheduler.max_batched_tokens - sum(c.num_tokens for c in chunks)
        drafted, wanted = [], []
        cfg = self.config
        for i, c in enumerate(chunks):
            seq = c.seq
            if room <= 0:
                break
            if c.num_tokens != 1 or not c.samples or seq in guided or seq.want_prompt_logprobs:
                continue
            state = self.states.get(seq) or self.states.setdefault(seq, _Drafting())
            if len(seq.output_ids) < state.resume_at:
                continue
            k = min(
                cfg.num_speculative_tokens,
                room,
                seq.config.max_tokens - len(seq.output_ids) - 1,
                self.max_model_len - seq.num_tokens - 1,
            )
            if self.drafter is not None:  # the draft model writes K/V up to the drafts: blocks first
                if k > 0 and scheduler.pool.grow(seq, seq.num_tokens + k):
                    wanted.append((i, k))
                    room -= k
                continue
            tokens = propose(state.tokens(seq), k, cfg.prompt_lookup_min, cfg.prompt_lookup_max) if k > 0 else []
            if tokens and scheduler.pool.grow(seq, seq.num_tokens + len(tokens)):
                drafted.append(self._extend(chunks, i, tokens))
                room -= len(tokens)
        if wanted:
            assert self.drafter is not None
            proposals = self.drafter.propose([(chunks[i].seq, k) for i, k in wanted], scheduler.max_batched_tokens)
            for (i, _), tokens in zip(wanted, proposals):
                if tokens:
                    drafted.append(self._extend(chunks, i, tokens))
                else:  # still catching up on a long context: a plain decode this step
                    scheduler.pool.shrink(chunks[i].seq, chunks[i].seq.num_tokens)
        return drafted

    @staticmethod
    def _extend(chunks: list[Chunk], i: int, tokens: list[int]) -> Chunk:
        c = chunks[i]
        c.seq.output_ids += tokens
        c.seq.num_tokens += len(tokens)
        chunks[i] = Chunk(c.seq, c.start, 1 + len(tokens), num_draft=len(tokens))
        return chunks[i]

    def verify(self, sampler, drafted: list[Chunk], rows, runs: dict[Sequence, tuple[list, list]]) -> None:
        """Sample the drafted chunks' draft rows (`rows`, num_draft each, in order), take their drafts back out of
        the outputs, and set each one's run in `runs` (it holds the bonus row's token and logprob) to the tokens
        and logprobs it emits: the accepted drafts, then the correction or the bonus."""
        views = []
        for c in drafted:
            seq = c.seq
            base = seq.output_ids[: len(seq.output_ids) - c.num_draft]
            views += [
                DraftRow(seq.config, seq.index, seq.prompt_ids, base + seq.output_ids[len(base) : len(base) + j])
                for j in range(c.num_draft)
            ]
        tokens, logprobs = sampler.sample(rows, views)
        row = 0
        for c in drafted:
            seq, k = c.seq, c.num_draft
            drafts = seq.output_ids[-k:]
            del seq.output_ids[-k:]
            seq.num_tokens -= k
            accepted = 0
            while accepted < k and tokens[row + accepted] == drafts[accepted]:
                accepted += 1
            bonus_token, bonus_lp = runs[seq]
            if accepted < k:
                bonus_token, bonus_lp = [tokens[row + accepted]], [logprobs[row + accepted]]
            runs[seq] = (tokens[row : row + accepted] + bonus_token, logprobs[row : row + accepted] + bonus_lp)
            row += k
            self.num_drafts += 1
            self.num_draft_tokens += k
            self.num_accepted_tokens += accepted
            for pos in range(accepted):
                self.accepted_per_pos[pos] += 1
            if self.per_request != "none":
                self._observe(seq, k, accepted)
            self.states[seq].judge(accepted, len(seq.output_ids))
