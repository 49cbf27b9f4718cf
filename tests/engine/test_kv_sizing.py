"""The KV cache is sized after the model and its largest step: a runner starts without a cache, a scratch step of
the scheduler's budget measures its peak (CUDA), and the cache gets what is left."""

from __future__ import annotations

from typing import cast

import pytest
import torch

from engine_svc.__main__ import make_parser
from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence
from engine_svc.serving.loader import build_engine
from tests.engine.conftest import tiny_llama

BLOCK = 4


def runner(device: str = "cpu") -> ModelRunner:
    model = tiny_llama().to(device)
    return ModelRunner(model, block_size=BLOCK, num_blocks=0, max_num_seqs=8, max_model_len=64, cuda_graphs=False)


def test_a_scratch_step_fills_blocks_from_one_and_the_cache_is_replaced():
    paged = runner()
    assert paged.kv_caches == []
    paged.allocate_kv(32)
    paged._scratch_step(tokens=30, rows=4)  # 8, 8, 7, 7 tokens: blocks 1-2, 3-4, 5-6, 7-8
    cache = paged.kv_caches[0]
    assert cache[:BLOCK].abs().sum() == 0  # the scratch block stays untouched
    assert cache[BLOCK : 9 * BLOCK].abs().sum(dim=(1, 2, 3)).count_nonzero() == 30
    assert paged.max_blocks_per_seq == 16  # 64 tokens of 4: the cache is larger
    paged.allocate_kv(6)
    assert paged.kv_caches[0].shape[0] == 6 * BLOCK and paged.max_blocks_per_seq == 5


def test_cpu_sets_nothing_aside_and_keeps_its_smaller_step():
    assert runner().step_peak_bytes(2048, 256) == 0
    loaded = build_engine(tiny_llama(), make_parser().parse_args([]), model_name="tiny")
    assert loaded.engine.scheduler.max_batched_tokens == 2048


@pytest.mark.skipif(not torch.cuda.is_available(), reason="measures CUDA memory")
def test_cuda_measures_the_largest_step_and_frees_its_scratch_cache():
    paged = runner("cuda")
    first = paged.step_peak_bytes(64, 8)  # the first step also allocates what stays (cuBLAS's workspace): counted
    small, large = paged.step_peak_bytes(64, 8), paged.step_peak_bytes(512, 8)
    assert first >= small
    assert paged.kv_caches == [] and 0 < small < large
    # rows hold at most the model's 64 positions: a budget beyond rows x 64 measures rows x 64 tokens
    assert paged.step_peak_bytes(4096, 8) == pytest.approx(large, rel=0.1)
    assert paged.step_peak_bytes(4096, 1) > 0


def test_an_engine_that_owns_its_model_drops_the_unfused_layers_and_computes_the_same():
    args = make_parser().parse_args(["--quantization", "fp8"])
    owner, borrower = tiny_llama(), tiny_llama()
    engines = [build_engine(model, args, model_name="tiny", owns_model=model is owner) for model in (owner, borrower)]
    layer_weights = [sum(p.numel() for p in model.model.layers.parameters()) for model in (owner, borrower)]
    assert layer_weights[0] == 0 and layer_weights[1] > 0
    logits = []
    for loaded in engines:
        seq = Sequence("a", 0, [5, 9, 13, 200, 7, 31], SamplingConfig())
        seq.block_ids = [1]
        logits.append(cast(ModelRunner, loaded.engine.runner).execute([Chunk(seq, 0, 6)]))
    torch.testing.assert_close(logits[0], logits[1], atol=0, rtol=0)


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        (("--max-model-len", "513"), "longer than the model's context (512"),  # tiny_llama's max_position_embeddings
        (("--max-model-len", "64", "--num-kv-blocks", "8", "--block-size", "4"), "holds 28 tokens of one sequence"),
    ],
)
def test_a_max_model_len_the_engine_cannot_serve_is_refused_at_start(flags, refusal):
    with pytest.raises(ValueError, match=r"--max-model-len") as refused:
        build_engine(tiny_llama(), make_parser().parse_args(list(flags)), model_name="tiny")
    assert refusal in str(refused.value)


def test_the_models_own_length_is_lowered_to_what_the_cache_holds():
    flags = ["--num-kv-blocks", "8", "--block-size", "4"]
    assert build_engine(tiny_llama(), make_parser().parse_args(flags), model_name="tiny").engine.max_model_len == 28
