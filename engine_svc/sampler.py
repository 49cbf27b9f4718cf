"""Batched sampling on the device, without host syncs until the tokens are shipped.

Randomness is counter-based: each row's Gumbel noise is a hash of (request seed, choice index, output
position, token id), so a seeded request draws the same tokens whatever its batch mates and wherever it
runs. Logits processors (penalties, logit_bias, allowed ids, min_tokens) touch only the rows that ask.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

_MASK32 = 0xFFFFFFFF


def _hash32(x):
    """A 32-bit integer mix that works on Python ints and int64 tensors alike (products stay below 2**63)."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _MASK32
    x = x ^ (x >> 15)
    x = (x * 0x45D9F3B) & _MASK32
    return x ^ (x >> 16)


def row_key(seed: int, index: int, position: int) -> int:
    key = _hash32((position * 0x9E3779B1 + index) & _MASK32)
    key = _hash32(key ^ ((seed >> 32) & _MASK32))
    return _hash32(key ^ (seed & _MASK32))


@dataclass
class RowLogprobs:
    logprob: float
    rank: int
    top_ids: list[int]
    top_logprobs: list[float]


class Sampler:
    def __init__(self, vocab_size: int, device: torch.device):
        self.vocab_size = vocab_size
        self.device = device
        self.column_hash = _hash32(torch.arange(vocab_size, dtype=torch.int64, device=device))

    def sample(self, logits: torch.Tensor, seqs) -> tuple[list[int], list[RowLogprobs | None]]:
        """One token per row of `logits` [rows, vocab] for the sequences `seqs` (same order)."""
        logits = logits.float()
        for row, seq in enumerate(seqs):
            if seq.config.needs_processing:
                self._process(logits[row], seq)
        configs = [seq.config for seq in seqs]
        tokens = logits.argmax(dim=-1)
        if not all(c.greedy for c in configs):
            tokens = torch.where(self._tensor([c.greedy for c in configs], torch.bool), tokens,
                                 self._draw(logits, seqs, configs))
        wanted = [row for row, c in enumerate(configs) if c.logprobs is not None]
        logprobs: list[RowLogprobs | None] = [None] * len(seqs)
        if wanted:
            rows = self._tensor(wanted, torch.int64)
            top = max(configs[row].logprobs for row in wanted)
            found = token_logprobs(logits[rows], tokens[rows], top)
            for row, item in zip(wanted, found):
                k = configs[row].logprobs
                logprobs[row] = RowLogprobs(item.logprob, item.rank, item.top_ids[:k], item.top_logprobs[:k])
        return tokens.tolist(), logprobs

    def _tensor(self, values, dtype):
        return torch.tensor(values, dtype=dtype).to(self.device, non_blocking=True)

    def _draw(self, logits, seqs, configs):
        temps = self._tensor([c.temperature if not c.greedy else 1.0 for c in configs], torch.float32)
        scores = logits / temps[:, None]
        if any(c.needs_sort for c in configs):
            scores = self._top_k_top_p(scores, configs)
        if any(c.min_p > 0 for c in configs):
            probs = scores.softmax(dim=-1)
            floor = self._tensor([c.min_p for c in configs], torch.float32)[:, None] * probs.amax(-1, keepdim=True)
            scores = scores.masked_fill(probs < floor, float("-inf"))
        keys = self._tensor([row_key(s.config.seed, s.index, len(s.output_ids)) for s in seqs], torch.int64)
        bits = _hash32(keys[:, None] ^ self.column_hash[None, :]) >> 8
        uniform = (bits.float() + 0.5) * (1.0 / (1 << 24))
        return (scores - torch.log(-torch.log(uniform))).argmax(dim=-1)

    def _top_k_top_p(self, scores, configs):
        sorted_scores, order = scores.sort(dim=-1, descending=True)
        ks = self._tensor([c.top_k if c.top_k > 0 else self.vocab_size for c in configs], torch.int64)
        ranks = torch.arange(self.vocab_size, device=self.device)[None, :]
        cut = ranks >= ks[:, None]
        ps = self._tensor([c.top_p for c in configs], torch.float32)
        probs = sorted_scores.masked_fill(cut, float("-inf")).softmax(dim=-1)
        cut |= (probs.cumsum(dim=-1) - probs) > ps[:, None]
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
        if config.min_tokens and len(seq.output_ids) < config.min_tokens and config.stop_token_ids:
            row[torch.tensor(sorted(config.stop_token_ids), device=self.device)] = float("-inf")
        if config.repetition_penalty != 1.0:
            seen = torch.tensor(sorted(set(seq.prompt_ids) | set(seq.output_ids)), device=self.device)
            values = row[seen]
            row[seen] = torch.where(values > 0, values / config.repetition_penalty, values * config.repetition_penalty)
        if (config.presence_penalty or config.frequency_penalty) and seq.output_ids:
            counts = torch.bincount(torch.tensor(seq.output_ids, device=self.device), minlength=row.shape[0]).float()
            row -= config.frequency_penalty * counts + config.presence_penalty * (counts > 0).float()


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, top: int) -> list[RowLogprobs]:
    """Logprob and rank of `targets` in each row of `logits`, with the `top` most likely alternatives."""
    logp = logits.float().log_softmax(dim=-1)
    chosen = logp.gather(1, targets[:, None])
    ranks = (logp > chosen).sum(dim=-1) + 1
    top_values, top_ids = logp.topk(top, dim=-1) if top else (logp[:, :0], targets[:, None][:, :0])
    rows = zip(chosen[:, 0].tolist(), ranks.tolist(), top_ids.tolist(), top_values.tolist())
    return [RowLogprobs(lp, rank, ids, values) for lp, rank, ids, values in rows]
