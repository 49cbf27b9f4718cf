"""PackedInputs on its own (segments by name, one tensor behind them all), and the runner's steps read through it:
a mixed step's inputs hold what its chunks say, and the decode graphs' static layout matches the live one."""

from __future__ import annotations

import pytest
import torch

from engine_svc.model.packed_inputs import PackedInputs
from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence
from tests.engine.conftest import tiny_llama

BLOCK = 4


def packed() -> PackedInputs:
    inputs = PackedInputs()
    inputs.add("ids", [5, 6, 7])
    inputs.add("positions", [0, 1, 2])
    inputs.add("tables", [1, 2, 3, 4, 5, 6], shape=(2, 3))
    inputs.add("nothing", [])
    return inputs


def test_segments_are_read_back_by_name():
    inputs = packed()
    views = inputs.views(inputs.host())
    assert inputs.size == 14  # two padding values: ids and positions have odd lengths
    assert views["ids"].tolist() == [5, 6, 7]
    assert views["positions"].tolist() == [0, 1, 2]
    assert views["tables"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert views["nothing"].numel() == 0


def test_every_segment_is_a_view_of_one_tensor():
    views = packed().to(torch.device("cpu"))
    assert views["ids"].dtype == torch.int64
    assert len({v.untyped_storage().data_ptr() for v in views.values()}) == 1


def test_copy_into_fills_the_front_of_a_buffer():
    buffer = torch.full((20,), -1, dtype=torch.int64)
    views = packed().copy_into(buffer)
    assert views["tables"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert views["ids"].data_ptr() == buffer.data_ptr()
    assert buffer[14:].tolist() == [-1] * 6


def test_every_segment_starts_16_bytes_aligned():
    """Triton compiles once per pointer alignment: a segment at an odd offset would compile its readers again."""
    views = packed().to(torch.device("cpu"))
    assert [v.storage_offset() % 2 for v in views.values()] == [0, 0, 0, 0]


def test_a_name_is_packed_once():
    inputs = packed()
    with pytest.raises(ValueError, match="ids"):
        inputs.add("ids", [1])


def test_empty():
    inputs = PackedInputs()
    inputs.add("tables", [], shape=(0, 0))
    assert inputs.host().shape == (0,)
    assert inputs.views(inputs.host())["tables"].shape == (0, 0)


@pytest.fixture(scope="module")
def runner() -> ModelRunner:
    return ModelRunner(
        tiny_llama(), block_size=BLOCK, num_blocks=32, max_num_seqs=8, max_model_len=64, cuda_graphs=False
    )


def sequence(request_id: str, prompt: list[int], output: list[int], blocks: list[int]) -> Sequence:
    seq = Sequence(request_id, 0, prompt, SamplingConfig(prompt_logprobs=1 if not output else None))
    for token in output:
        seq.append(token)
    seq.block_ids = blocks
    return seq


class Recorder:
    """Stands in for the model: keeps what a step fed it."""

    def __call__(self, ids, positions, meta, kv_caches, backend, logits_rows=None, ops=None):
        self.ids, self.positions, self.meta, self.logits_rows = ids, positions, meta, logits_rows
        return torch.zeros(len(logits_rows), 8)


def test_a_mixed_step_feeds_the_model_what_its_chunks_say(runner, monkeypatch):
    decoding = sequence("a", [5, 6, 7, 8, 9], [10], [3, 7])
    decoding.num_computed = 5
    prefilling = sequence("b", [11, 12, 13, 14, 15, 16], [], [2, 5])
    prefilling.want_prompt_logprobs = True
    model = Recorder()
    monkeypatch.setattr(runner, "model", model)
    monkeypatch.setattr(runner.backend, "wants_prefill_table", True)
    runner.execute([Chunk(decoding, 5, 1), Chunk(prefilling, 0, 6)])

    assert model.ids.tolist() == [10, 11, 12, 13, 14, 15, 16]
    assert model.positions.tolist() == [5, 0, 1, 2, 3, 4, 5]
    meta = model.meta
    assert meta.slot_mapping.tolist() == [7 * BLOCK + 1, 8, 9, 10, 11, 20, 21]
    assert meta.num_decodes == 1
    assert meta.decode_context_lens.tolist() == [6]
    assert meta.decode_block_tables.tolist() == [[3, 7]]
    # The sampling rows in chunk order (the decode's, the prefill's last), then the prompt-logprob positions.
    assert model.logits_rows.tolist() == [0, 6, 1, 2, 3, 4, 5]
    [chunk] = meta.prefills
    assert (chunk.token_start, chunk.num_tokens, chunk.context_start, chunk.block_ids.tolist()) == (1, 6, 0, [2, 5])
    assert meta.prefill_table is not None and meta.prefill_blocks is not None
    assert meta.prefill_table.tolist() == [[1, 6, 0, 0]]
    assert meta.prefill_blocks.tolist() == [2, 5]
    storages = {t.untyped_storage().data_ptr() for t in (model.ids, model.logits_rows, meta.prefill_table)}
    assert len(storages) == 1  # one host-to-device copy


def test_decode_graph_layout_matches_the_live_one(runner):
    """A graph is captured on views of the static buffer laid out for (rows, width) and replayed on live
    inputs copied into it: every segment must land where the graph reads it."""
    seqs = [sequence(str(i), [1, 2, 3], [4], [i + 1, 0]) for i in range(3)]
    chunks = [Chunk(seq, 3, 1) for seq in seqs]
    static = torch.zeros(64, dtype=torch.int64)
    layout = runner.inputs.decode([], 4, 2)
    captured = layout.views(static[: layout.size])
    live = runner.inputs.decode(chunks, 4, 2, back=1).copy_into(static)
    assert captured.keys() == live.keys()
    for name, view in captured.items():
        assert (view.data_ptr(), view.shape) == (live[name].data_ptr(), live[name].shape), name
    assert live["ids"].tolist() == [4, 4, 4, 0]
    assert live["positions"].tolist() == [2, 2, 2, -1]  # one step behind: the graph advances them first
    assert live["block_tables"].tolist() == [[1, 0], [2, 0], [3, 0], [0, 0]]
