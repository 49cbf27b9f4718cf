"""Sampler pieces that must agree with their scalar definitions: the noise keys hashed for a whole decode run at
once, and the row argmax (CPU path; the CUDA kernels are in test_triton_argmax.py)."""

from __future__ import annotations

import weakref

import torch

from engine_svc.model.sampler import Sampler, argmax_rows, row_key
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
