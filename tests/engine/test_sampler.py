"""Sampler pieces that must agree with their scalar definitions: the noise keys hashed for a whole decode run at
once, and the row argmax (CPU path; the CUDA kernels are in test_triton_argmax.py)."""

from __future__ import annotations

import weakref

import torch

from engine_svc.model.sampler import Sampler, _hash32, argmax_rows, row_key
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Sequence


def test_keys_of_a_decode_run_equal_the_scalar_hash():
    seeds = [0, 1, -1, 2**62 + 12345, -(2**63), 2**63 - 1, 987654321]
    seqs = []
    for row, seed in enumerate(seeds):
        seq = Sequence(f"r{row}", row % 3, [5, 6, 7], SamplingConfig(temperature=0.7, seed=seed))
        seq.output_ids = [1] * (row * 1000)
        seqs.append(seq)
    random = Sampler(64, torch.device("cpu")).prepare(seqs, steps=5).random
    assert random is not None
    keys = random.keys
    expected = [[row_key(s.config.seed, s.index, len(s.output_ids) + step) for s in seqs] for step in range(5)]
    assert keys.tolist() == expected


def test_argmax_rows_writes_into_out_and_keeps_nothing_alive():
    logits = torch.randn(3, 50)
    logits[1] = 0.0  # all tied: the first
    out = torch.full((3,), -1, dtype=torch.int64)
    assert argmax_rows(logits, out=out) is out and torch.equal(out, logits.argmax(-1))
    alive = weakref.ref(logits)
    del logits
    assert alive() is None  # no cache holds a step's logits


def test_no_token_wins_a_draw_on_its_noise_alone():
    """A column whose hash takes the top 24-bit value has uniform (2**24 - 0.5) / 2**24, which rounds to 1.0 in
    float32: its Gumbel noise was +inf (capped at the float32 maximum) and outbid every finite score, so about
    one draw in V / 2**24 (~0.3% at 49k tokens) took that token whatever the logits: a +100 logit_bias ignored
    (a CI flake of test_completion_field[logit_bias]: ' hung!!!' for '!!!!'). Seed 7's first draw is such a one."""
    vocab, seed, target = 16384, 7, 17
    sampler = Sampler(vocab, torch.device("cpu"))
    bits = _hash32(torch.tensor([row_key(seed, 0, 0)]) ^ sampler.column_hash) >> 8
    (hit,) = (bits == (1 << 24) - 1).nonzero().flatten().tolist()  # the case this test is about is there
    assert hit != target

    def draw(**config) -> int:
        seq = Sequence("r", 0, [5, 6, 7], SamplingConfig(temperature=1.0, seed=seed, **config))
        (token,), _ = sampler.sample(torch.zeros(1, vocab), [seq])
        return token

    assert draw(logit_bias={target: 100.0}) == target
    assert draw(logit_bias={target: 100.0, hit: -100.0}) == target
    assert draw(allowed_token_ids=[target, target + 1]) in (target, target + 1)  # -inf stays -inf


def test_named_logprob_ids_replace_a_rows_top_k_beside_a_row_that_keeps_it():
    """vLLM's logprob_token_ids: a row's alternatives are its named ids' logprobs, in their order, while a batch
    mate's stay its top-k (one log-softmax, the named ids gathered beside the top-k)."""
    logits = torch.randn(3, 64)
    seqs = [
        Sequence("named", 0, [1, 2], SamplingConfig(temperature=0, logprobs=0, logprob_token_ids=(9, 3, 40))),
        Sequence("top", 0, [1, 2], SamplingConfig(temperature=0, logprobs=2)),
        Sequence("wide", 0, [1, 2], SamplingConfig(temperature=0, logprobs=0, logprob_token_ids=(7,))),
    ]
    tokens, rows = Sampler(64, torch.device("cpu")).sample(logits.clone(), seqs)
    logp = logits.log_softmax(-1)
    assert tokens == logits.argmax(-1).tolist()
    named, top, wide = rows
    assert named is not None and top is not None and wide is not None
    assert named.top_ids == [9, 3, 40] and torch.allclose(torch.tensor(named.top_logprobs), logp[0, [9, 3, 40]])
    assert top.top_ids == logp[1].topk(2).indices.tolist()
    assert wide.top_ids == [7] and torch.allclose(torch.tensor(wide.top_logprobs), logp[2, [7]])
    assert named.rank == 1 and abs(named.logprob - logp[0].max().item()) < 1e-5
