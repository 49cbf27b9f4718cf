"""bench/serving/roofline.py's bound for a mixture of experts: a decode step of C tokens reads the experts they route
to, E * (1 - (1 - k/E)^C) of them, not the k one token runs (the bench printed 13% of a bound that assumed k
for Qwen3-30B-A3B at 64 streams; 34% against this one)."""

from __future__ import annotations

import pytest

from bench.engine.shapes import shape_config
from bench.serving.roofline import Machine, ModelShape, bounds

H100 = Machine(2981e9, 789e12, "cuda", "bfloat16", 1403e12)


def _shape(name: str, flags=()) -> ModelShape:
    return ModelShape.from_config(shape_config(name), 2).for_flags(list(flags))


def test_a_dense_step_reads_its_weights_once_whatever_the_batch():
    dense = _shape("llama-8b")
    assert dense.experts == 0 and dense.weight_bytes_at(256) == dense.weight_bytes


@pytest.mark.parametrize("flags", [(), ("--quantization", "fp8")])
def test_a_batch_reads_the_experts_its_tokens_route_to(flags):
    moe = _shape("qwen3-30b-a3b", flags)
    assert (moe.experts, moe.top_k, moe.expert_intermediate) == (128, 8, 768)
    one_expert = moe.layers * 3 * moe.hidden * moe.expert_intermediate * moe.projection_bytes
    assert moe.weight_bytes_at(1) == pytest.approx(moe.weight_bytes)
    every_expert = moe.weight_bytes + (moe.experts - moe.top_k) * one_expert
    assert moe.weight_bytes_at(64) == pytest.approx(every_expert - 128 * (1 - 8 / 128) ** 64 * one_expert)
    assert moe.weight_bytes_at(64) > 0.97 * every_expert  # 64 tokens reach ~126 of 128 experts
    step = [bounds(moe, H100, c, 1024, 0, 128)["tpot_s"] for c in (1, 8, 64)]
    assert step[0] < step[1] < step[2]


def test_one_prefill_alone_reads_the_weights_its_prompt_routes_to():
    """Batch-1 128 / 128 on Qwen3-30B-A3B: the 128-token prompt reaches every expert (~61 GB, ~20 ms on an
    H100), where its FLOPs alone allowed 1 ms; beside other streams the reads are shared and only FLOPs count."""
    moe, dense = _shape("qwen3-30b-a3b"), _shape("llama-8b")
    alone = bounds(moe, H100, 1, 128, 0, 128)
    assert alone["ttft_s"] == pytest.approx(moe.weight_bytes_at(128) / H100.bandwidth)
    assert alone["ttft_s"] > 0.019
    assert alone["output_tok_per_s"] == pytest.approx(128 / (128 * alone["tpot_s"] + alone["ttft_s"]))
    batch = bounds(moe, H100, 64, 128, 0, 128)
    assert batch["output_tok_per_s"] > 64 * 128 / (128 * batch["tpot_s"] + 64 * alone["ttft_s"])
    long_prompt = bounds(dense, H100, 1, 1024, 0, 128)  # compute-bound: unchanged
    assert long_prompt["ttft_s"] > dense.weight_bytes / H100.bandwidth
