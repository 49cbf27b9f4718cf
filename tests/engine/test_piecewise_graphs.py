"""Piecewise CUDA graphs for mixed and prefill steps (engine_svc/model/piecewise.py) against the eager step, on
CUDA (`python -m pytest tests/engine/test_piecewise_graphs.py` on the GPU machine). Skipped elsewhere."""

from __future__ import annotations

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("CUDA graphs need CUDA", allow_module_level=True)
pytest.importorskip("triton")

from bench.engine.shapes import build_model
from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence

BLOCK = 16


def runners(up_to: int) -> tuple[ModelRunner, ModelRunner]:
    """(eager mixed steps, piecewise graphs for steps of up to `up_to` tokens) over one random 2-layer Llama."""
    model = build_model("llama-tiny", "cuda", torch.bfloat16, max_len=8192)
    made = tuple(
        ModelRunner(model, block_size=BLOCK, num_blocks=64, max_num_seqs=8, max_model_len=512, cuda_graphs=True,
                    attention="triton", mixed_step_graphs_up_to=limit)
        for limit in (0, up_to)
    )  # fmt: skip
    return made  # type: ignore[return-value]


def sequences() -> list[Sequence]:
    g = torch.Generator().manual_seed(0)
    made = [Sequence(name, 0, torch.randint(3, 500, (n,), generator=g).tolist(), SamplingConfig())
            for name, n in (("a", 70), ("b", 130), ("c", 33), ("d", 50))]  # fmt: skip
    for seq, first in zip(made, (1, 10, 30, 40)):
        seq.block_ids = list(range(first, first + -(-(seq.num_tokens + 1) // BLOCK)))
    return made


def test_mixed_and_prefill_steps_equal_the_eager_step():
    """Fresh, continuing, mixed (decodes first) and decode-only steps: the same logits and the same K/V in every
    block but the scratch block 0, where padding rows write. The 163-token step is larger than the graphs'
    largest bucket and runs eagerly."""
    eager, pieces = runners(128)
    a, b, c, d = sequences()
    steps = [  # (tokens sampled before the step, its chunks)
        ([], [Chunk(a, 0, 40), Chunk(b, 0, 17)]),  # fresh: 57 tokens, the 64 bucket
        ([], [Chunk(a, 40, 30), Chunk(b, 17, 100), Chunk(c, 0, 33)]),  # 163 tokens: eager
        ([], [Chunk(b, 117, 13)]),  # continuing after 117: the 16 bucket
        ([(a, 7), (b, 11), (c, 9)], [Chunk(a, 70, 1), Chunk(c, 33, 1), Chunk(b, 130, 1), Chunk(d, 0, 50)]),
        ([(a, 8)], [Chunk(a, 71, 1)]),  # decode only: the decode graph
    ]
    for sampled, chunks in steps:
        for seq, token in sampled:
            seq.append(token)
        logits = [runner.execute(chunks).float() for runner in (eager, pieces)]
        torch.testing.assert_close(logits[1], logits[0], atol=5e-2, rtol=5e-2)
        for layer in (0, -1):
            caches = [runner.kv_caches[layer][BLOCK:].float() for runner in (eager, pieces)]
            torch.testing.assert_close(caches[1], caches[0], atol=5e-2, rtol=5e-2)
    assert pieces.pieces is not None and sorted(pieces.pieces.graphs) == [16, 64]  # captured on first use


def test_warm_up_captures_every_bucket_and_a_new_cache_drops_them():
    _, pieces = runners(100)
    assert pieces.pieces is not None and pieces.pieces.buckets == [16, 32, 64, 96, 100]
    pieces.warm_up()
    assert sorted(pieces.pieces.graphs) == [16, 32, 64, 96, 100]
    assert all(len(graphs) == 3 for graphs in pieces.pieces.graphs.values())  # 2 layers: 3 pieces
    pieces.allocate_kv(32)
    assert not pieces.pieces.graphs and not pieces.graphs
