"""Decode CUDA graphs (engine_svc/model/runner.py) on CUDA: which (rows, table width) graphs exist before serving,
and a large batch's one graph against the eager step at narrow and wide block tables
(`python -m pytest tests/engine/test_decode_graphs.py` on the GPU machine). Skipped elsewhere."""

from __future__ import annotations

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("CUDA graphs need CUDA", allow_module_level=True)
pytest.importorskip("triton")

from bench.engine.shapes import build_model
from engine_svc.model.runner import WARM_EVERY_WIDTH_ROWS, ModelRunner
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence

BLOCK = 16
WIDTHS = (1, 2, 4, 8, 16, 32)  # 512 tokens a sequence at most: 32 blocks


def runners() -> tuple[ModelRunner, ModelRunner]:
    """(decode graphs, eager) over one random 2-layer Llama with 2 KV heads: from 66 rows on a decode step's
    programs cover the GPU's SMs without context splits, so the width no longer matters."""
    model = build_model("llama-tiny", "cuda", torch.bfloat16, max_len=1024)
    made = tuple(
        ModelRunner(model, block_size=BLOCK, num_blocks=2900, max_num_seqs=96, max_model_len=512, cuda_graphs=graphs,
                    attention="triton")
        for graphs in (True, False)
    )  # fmt: skip
    return made  # type: ignore[return-value]


def batch(count: int, shortest: int, first_block: int) -> list[Sequence]:
    g = torch.Generator().manual_seed(first_block)
    made = []
    for i in range(count):
        seq = Sequence(f"s{first_block}-{i}", 0, torch.randint(3, 500, (shortest + i,), generator=g).tolist(),
                       SamplingConfig())  # fmt: skip
        start = first_block + i * 20
        seq.block_ids = list(range(start, start + -(-(seq.num_tokens + 1) // BLOCK)))
        made.append(seq)
    return made


def test_warm_up_captures_every_width_of_few_rows_and_one_wide_graph_of_many():
    graphs, _ = runners()
    graphs.warm_up()
    for rows in graphs.batch_buckets:
        free = graphs.backend.decode_width_free(rows, 512)
        assert free == (rows >= 66)  # 2 KV heads a row: 132 programs
        if free or rows <= WARM_EVERY_WIDTH_ROWS:  # every width's graph is there
            assert all((rows, graphs._graph_width(rows, width)) in graphs.graphs for width in WIDTHS)
    assert {width for rows, width in graphs.graphs if rows == 80} == {32}  # 80 rows: one graph, the widest


def test_one_graph_runs_a_large_batch_at_any_width_as_the_eager_step_does():
    graphs, eager = runners()
    graphs.warm_up()
    captured = set(graphs.graphs)
    for shortest, first_block in ((20, 1), (190, 1401)):  # tables 2-6 blocks wide (bucket 8), then 12-17 (32)
        seqs = batch(70, shortest, first_block)
        prefill = [Chunk(seq, 0, seq.num_tokens) for seq in seqs]
        for runner in (graphs, eager):
            runner.execute(prefill)
        for i, seq in enumerate(seqs):
            seq.append(3 + i)
        decode = [Chunk(seq, seq.num_tokens - 1, 1) for seq in seqs]
        logits = [runner.execute(decode).float() for runner in (graphs, eager)]
        torch.testing.assert_close(logits[0], logits[1], atol=5e-2, rtol=5e-2)
    assert set(graphs.graphs) == captured  # both widths replayed the 80-row graph captured before serving
