"""Sampler pieces that must agree with their scalar definitions: the noise keys hashed for a whole decode run at
once, and the two-pass row argmax."""

from __future__ import annotations

import torch

from engine_svc.sampler import Sampler, _argmax_chunk, row_key, two_pass_argmax
from engine_svc.sampling import SamplingConfig
from engine_svc.sequence import Sequence


def test_keys_of_a_decode_run_equal_the_scalar_hash():
    seeds = [0, 1, -1, 2**62 + 12345, -(2**63), 2**63 - 1, 987654321]
    seqs = []
    for row, seed in enumerate(seeds):
        seq = Sequence(f"r{row}", row % 3, [5, 6, 7], SamplingConfig(temperature=0.7, seed=seed))
        seq.output_ids = [1] * (row * 1000)
        seqs.append(seq)
    keys = Sampler(64, torch.device("cpu")).prepare(seqs, steps=5).keys
    expected = [[row_key(s.config.seed, s.index, len(s.output_ids) + step) for s in seqs] for step in range(5)]
    assert keys.tolist() == expected


def test_two_pass_argmax_takes_the_first_of_ties():
    for vocab in (128256, 49152, 4096):
        logits = torch.randn(4, vocab)
        logits[1] = 0.0
        logits[2, 5] = logits[2, vocab - 2] = 50.0  # equal maxima in different chunks
        for values in (logits, logits.bfloat16()):
            assert torch.equal(two_pass_argmax(values, _argmax_chunk(vocab)), values.argmax(-1))
    assert _argmax_chunk(997) == _argmax_chunk(1000) == 0  # no even split into 8+ chunks: the plain reduction
