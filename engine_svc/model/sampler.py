"""Batched sampling on the device, without host syncs until the tokens are shipped.

Randomness is counter-based: each row's Gumbel noise is a hash of (request seed, choice index, output
position, token id), so a seeded request draws the same tokens whatever its batch mates and wherever it
runs. Logits processors (penalties, logit_bias, allowed ids, min_tokens, bad words) and structured-output
masks touch only the rows that ask.

What logprobs carry is the engine's `logprobs_mode`, vLLM's four (its `--logprobs-mode`, engine-wide as there):
raw_* are the model's logits (after structured-output masks, which vLLM applies before its sampler too) before
any logits processor; processed_* are the scores a row is drawn from: after the processors and penalties and, for
a row that samples, temperature, top-k, top-p and min_p (cut tokens at -inf); a greedy row's after its
processors only, as vLLM resets a greedy request's temperature and cuts. *_logprobs: their log-softmax; *_logits:
the values themselves (ranks and the top-k order are the same either way). A row with logprob_token_ids (vLLM's)
gets those ids' values in place of its top-k.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

LOGPROBS_MODES = ("raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits")  # vLLM's; the first: default
_MASK32 = 0xFFFFFFFF
_BELOW_ONE = 1.0 - 2.0**-24  # the largest float32 below 1


def _hash32(x):
    """A 32-bit integer mix that works on Python ints and int64 tensors alike (products stay below 2**63)."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _MASK32
    x = x ^ (x >> 15)
    x = (x * 0x45D9F3B) & _MASK32
    return x ^ (x >> 16)


def row_key(seed, index, position):
    """The noise key of one row at one output position: Python ints, or int64 tensors that broadcast."""
    key = _hash32((position * 0x9E3779B1 + index) & _MASK32)
    key = _hash32(key ^ ((seed >> 32) & _MASK32))
    return _hash32(key ^ (seed & _MASK32))


def argmax_rows(logits: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Each row's argmax (the first, among ties), into `out` when given; on CUDA through two Triton kernels."""
    if logits.is_cuda:
        from engine_svc.model.triton_argmax import argmax_rows as over_chunks  # CUDA builds of torch bring Triton

        return over_chunks(logits, out)
    return torch.argmax(logits, dim=-1, out=out)


@dataclass(slots=True)
class RowLogprobs:
    logprob: float
    rank: int
    top_ids: list[int]
    top_logprobs: list[float]


@dataclass
class RandomRows:
    """The parameters of a batch where some rows draw at random (the others stay greedy), on the device."""

    greedy: torch.Tensor  # [rows] bool
    temperatures: torch.Tensor  # [rows, 1]
    keys: torch.Tensor  # [steps, rows] noise keys (output position advances per step)
    top_ks: torch.Tensor | None = None  # [rows, 1], set when some row cuts by top-k or top-p
    top_ps: torch.Tensor | None = None
    min_ps: torch.Tensor | None = None  # [rows, 1], set when some row has min_p


@dataclass
class SamplingBatch:
    """Per-row sampling parameters on the device, built once for one or more consecutive steps."""

    seqs: list
    random: RandomRows | None = None  # None: every row is greedy
    logprob_rows: list[int] = field(default_factory=list)  # rows that asked for logprobs
    logprob_index: torch.Tensor | None = None
    top: int = 0
    named: torch.Tensor | None = None  # [logprob rows, widest] the ids rows named (logprob_token_ids): named_ids


class Drawn:
    """One step's sampled tokens (and logprobs) on the device, on their way to the host without a sync."""

    def __init__(self, tokens: torch.Tensor, logprob_parts: tuple | None, batch: SamplingBatch):
        self.tokens = tokens
        self.batch = batch
        parts = (tokens, *(logprob_parts or ()))
        if tokens.is_cuda:
            self._host = [t.to("cpu", non_blocking=True) for t in parts]
            self._ready = torch.cuda.Event()
            self._ready.record()
        else:  # the tokens may be a view the next step overwrites
            self._host, self._ready = [tokens.clone(), *parts[1:]], None

    def result(self) -> tuple[list[int], list[RowLogprobs | None]]:
        """Waits for this step only (later steps may still run) and returns host lists."""
        if self._ready is not None:
            self._ready.synchronize()
        tokens, *parts = self._host
        logprobs: list[RowLogprobs | None] = [None] * len(self.batch.seqs)
        if parts:
            named_values = parts.pop().tolist() if self.batch.named is not None else []
            for i, (row, item) in enumerate(zip(self.batch.logprob_rows, logprob_rows(*parts))):
                config = self.batch.seqs[row].config
                ids, k = list(config.logprob_token_ids), config.logprobs
                if ids:  # named_values[i] is padded to the widest row's
                    logprobs[row] = RowLogprobs(item.logprob, item.rank, ids, named_values[i][: len(ids)])
                else:
                    logprobs[row] = RowLogprobs(item.logprob, item.rank, item.top_ids[:k], item.top_logprobs[:k])
        return tokens.tolist(), logprobs


class Sampler:
    def __init__(self, vocab_size: int, device: torch.device, logprobs_mode: str = LOGPROBS_MODES[0]):
        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs mode {logprobs_mode!r}: one of {', '.join(LOGPROBS_MODES)}")
        self.vocab_size = vocab_size
        self.device = device
        self.column_hash = _hash32(torch.arange(vocab_size, dtype=torch.int64, device=device))
        self.logprobs_mode = logprobs_mode
        self.processed = logprobs_mode.startswith("processed")
        self.as_logits = logprobs_mode.endswith("logits")

    def sample(self, logits: torch.Tensor, seqs, masks=None) -> tuple[list[int], list[RowLogprobs | None]]:
        """One token per row of `logits` [rows, vocab] for the sequences `seqs` (same order), logits processors
        included; `masks` (structured outputs' MaskJob) sets the logits its grammars disallow to -inf first."""
        logits = logits.float()
        if masks is not None:
            masks.apply(logits)
        batch = self.prepare(seqs)
        raw = None
        if not self.processed and any(seqs[row].config.needs_processing for row in batch.logprob_rows):
            raw = logits[batch.logprob_index]  # a copy: the logprob rows before their processors
        for row, seq in enumerate(seqs):
            if seq.config.needs_processing:
                self._process(logits[row], seq)
        return self.draw(logits, batch, 0, raw=raw).result()

    def prepare(self, seqs, steps: int = 1) -> SamplingBatch:
        """Device tensors for sampling `seqs` over `steps` consecutive steps (one host-to-device copy each)."""
        configs = [seq.config for seq in seqs]
        batch = SamplingBatch(list(seqs))
        if not all(c.greedy for c in configs):
            batch.random = self._random_rows(seqs, steps)
        wanted = [row for row, c in enumerate(configs) if c.logprobs is not None]
        if wanted:
            batch.logprob_rows, batch.logprob_index = wanted, self._tensor(wanted, torch.int64)
            batch.top = max((configs[row].logprobs for row in wanted if not configs[row].logprob_token_ids), default=0)
            named = [configs[row].logprob_token_ids for row in wanted]
            if any(named):
                batch.named = named_ids(named, self.device)
        return batch

    def _random_rows(self, seqs, steps: int) -> RandomRows:
        configs = [seq.config for seq in seqs]
        greedy = self._tensor([c.greedy for c in configs], torch.bool)
        temperatures = self._tensor([c.temperature if not c.greedy else 1.0 for c in configs], torch.float32)[:, None]
        top_ks = top_ps = min_ps = None
        if any(c.needs_sort for c in configs):
            top_ks = self._tensor([c.top_k if c.top_k > 0 else self.vocab_size for c in configs], torch.int64)[:, None]
            top_ps = self._tensor([c.top_p for c in configs], torch.float32)[:, None]
        if any(c.min_p > 0 for c in configs):
            min_ps = self._tensor([c.min_p for c in configs], torch.float32)[:, None]
        rows = torch.tensor([[s.config.seed, s.index, len(s.output_ids)] for s in seqs], dtype=torch.int64)
        positions = rows[:, 2] + torch.arange(steps)[:, None]  # [steps, rows], hashed at once on the host
        keys = row_key(rows[:, 0], rows[:, 1], positions).to(self.device, non_blocking=True)
        return RandomRows(greedy, temperatures, keys, top_ks, top_ps, min_ps)

    def draw(
        self,
        logits: torch.Tensor,
        batch: SamplingBatch,
        step: int,
        greedy: torch.Tensor | None = None,
        raw: torch.Tensor | None = None,
    ) -> Drawn:
        """Tokens for step `step` of `batch`, without waiting for the device (`greedy`: each row's argmax, when
        the caller has it already; `raw`: the logprob rows before their logits processors, when some had any)."""
        tokens = argmax_rows(logits) if greedy is None else greedy
        scores = None
        if batch.random is not None:
            scores = self._scores(logits.float(), batch.random)
            tokens = torch.where(batch.random.greedy, tokens, self._draw(scores, batch.random, step))
        parts = None
        if batch.logprob_rows:
            rows = batch.logprob_index
            if not self.processed:
                values = logits[rows] if raw is None else raw
            elif scores is None or batch.random is None:  # every row greedy: processed = after its processors
                values = logits[rows]
            else:
                values = torch.where(batch.random.greedy[rows, None], logits[rows].float(), scores[rows])
            parts = logprob_tensors(values, tokens[rows], batch.top, self.as_logits, batch.named)
        return Drawn(tokens, parts, batch)

    def _tensor(self, values, dtype):
        return torch.tensor(values, dtype=dtype).to(self.device, non_blocking=True)

    def _scores(self, logits, random: RandomRows):
        """What each row draws from: temperature, then top-k and top-p, then min_p (cut tokens at -inf)."""
        scores = logits / random.temperatures
        if random.top_ks is not None:
            scores = self._top_k_top_p(scores, random.top_ks, random.top_ps)
        if random.min_ps is not None:
            probs = scores.softmax(dim=-1)
            scores = scores.masked_fill(probs < random.min_ps * probs.amax(-1, keepdim=True), float("-inf"))
        return scores

    def _draw(self, scores, random: RandomRows, step: int):
        bits = _hash32(random.keys[step][:, None] ^ self.column_hash[None, :]) >> 8
        # The top 24-bit value's midpoint rounds to exactly 1.0 in float32, whose noise is +inf: it would outbid
        # every finite score, its token drawn whatever the logits, temperature or logit_bias (~V/2**24 of draws).
        # Held at the largest float32 below 1 instead, every noise is finite (at most ~16.6): a disallowed (-inf)
        # logit stays -inf, and no token wins on noise alone.
        uniform = ((bits.float() + 0.5) * (1.0 / (1 << 24))).clamp_(max=_BELOW_ONE)
        noise = -torch.log(-torch.log(uniform))
        return (scores + noise).argmax(dim=-1)

    def _top_k_top_p(self, scores, top_ks, top_ps):
        sorted_scores, order = scores.sort(dim=-1, descending=True)
        ranks = torch.arange(self.vocab_size, device=self.device)[None, :]
        cut = ranks >= top_ks
        probs = sorted_scores.masked_fill(cut, float("-inf")).softmax(dim=-1)
        cut |= (probs.cumsum(dim=-1) - probs) > top_ps
        return scores.masked_fill(cut.scatter(1, order, cut), float("-inf"))

    def _process(self, row: torch.Tensor, seq) -> None:
        config = seq.config
        if config.allowed_token_ids:
            keep = torch.tensor(config.allowed_token_ids, device=self.device)
            allowed = row[keep]
            row.fill_(float("-inf"))
            row[keep] = allowed
        if config.logit_bias:
            ids = torch.tensor(list(config.logit_bias), device=self.device)
            row[ids] += torch.tensor(list(config.logit_bias.values()), device=self.device)
        if config.bad_words:
            banned = banned_ids(config.bad_words, seq.output_ids)
            if banned:
                row[torch.tensor(banned, device=self.device)] = float("-inf")
        if config.min_tokens and len(seq.output_ids) < config.min_tokens and config.stop_token_ids:
            row[torch.tensor(sorted(config.stop_token_ids), device=self.device)] = float("-inf")
        if config.repetition_penalty != 1.0:
            seen = torch.tensor(sorted(set(seq.prompt_ids) | set(seq.output_ids)), device=self.device)
            values = row[seen]
            row[seen] = torch.where(values > 0, values / config.repetition_penalty, values * config.repetition_penalty)
        if (config.presence_penalty or config.frequency_penalty) and seq.output_ids:
            counts = torch.bincount(torch.tensor(seq.output_ids, device=self.device), minlength=row.shape[0]).float()
            row -= config.frequency_penalty * counts + config.presence_penalty * (counts > 0).float()


def banned_ids(bad_words: tuple[tuple[int, ...], ...], output_ids: list[int]) -> list[int]:
    """The last id of each bad word whose other ids the output ends with (vLLM's bad_words rule)."""
    banned = []
    for word in bad_words:
        prefix = len(word) - 1
        if prefix > len(output_ids):
            continue
        if prefix == 0 or output_ids[-prefix:] == list(word[:-1]):
            banned.append(word[-1])
    return banned


def log_scores(logits: torch.Tensor, as_logits: bool = False) -> torch.Tensor:
    """What logprobs report of each row of `logits`, in float32: its log-softmax (`as_logits`: the logits)."""
    values = logits.float()
    return values if as_logits else values.log_softmax(dim=-1)


def named_ids(rows, device: torch.device) -> torch.Tensor:
    """Rows of token ids (vLLM's logprob_token_ids, prompt_logprob_token_ids) as one [rows, widest] tensor, -1
    padded (as vLLM pads a ragged prompt_logprob_token_ids)."""
    width = max(map(len, rows))
    return torch.tensor([[*ids, *[-1] * (width - len(ids))] for ids in rows], dtype=torch.int64).to(
        device, non_blocking=True
    )


def gather_named(logp: torch.Tensor, named: torch.Tensor) -> torch.Tensor:
    """Each row's values at the ids it names (named_ids); -inf where -1 pads it."""
    return logp.gather(1, named.clamp_min(0)).masked_fill_(named < 0, float("-inf"))


def ranked(logp: torch.Tensor, targets: torch.Tensor, top: int):
    """(value, rank) of `targets` in each row of `logp` (log_scores) and the `top` highest (ids, values)."""
    chosen = logp.gather(1, targets[:, None])[:, 0]
    ranks = (logp > chosen[:, None]).sum(dim=-1) + 1
    top_values, top_ids = logp.topk(top, dim=-1) if top else (logp[:, :0], targets[:, None][:, :0])
    return chosen, ranks, top_ids, top_values


def logprob_tensors(
    logits: torch.Tensor, targets: torch.Tensor, top: int, as_logits: bool = False, named: torch.Tensor | None = None
):
    """`ranked` over `logits`' log_scores, on the device; with `named` ids per row, their values last."""
    logp = log_scores(logits, as_logits)
    parts = ranked(logp, targets, top)
    return parts if named is None else (*parts, gather_named(logp, named))


def logprob_rows(chosen, ranks, top_ids, top_values) -> list[RowLogprobs]:
    rows = zip(chosen.tolist(), ranks.tolist(), top_ids.tolist(), top_values.tolist())
    return [RowLogprobs(lp, rank, ids, values) for lp, rank, ids, values in rows]
