"""Tiny windowed, soft-capped and sinked families (families.py) on the Triton attention kernels through the model
runner, against the SDPA backend (itself checked against transformers in test_families.py): eager, on CUDA or
through Triton's interpreter (`TRITON_INTERPRET=1`, float32); and with decode and piecewise mixed-step CUDA graphs
on CUDA (`python -m pytest tests/engine/test_triton_windowed_families.py` on the GPU machine). Skipped otherwise."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("the Triton kernels need CUDA (or TRITON_INTERPRET=1)", allow_module_level=True)
pytest.importorskip("triton")

from engine_svc.model.attention import make_backend
from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence
from tests.engine.families import tiny

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32  # the interpreter mishandles bf16
# bf16: each backend's logits are within 0.022 of float32's (measured on CPU), so about twice that between them.
TOLERANCE = 5e-2 if DEVICE == "cuda" else 1e-3


def runner(model, **flags) -> ModelRunner:
    return ModelRunner(model, block_size=4, num_blocks=32, max_num_seqs=4, max_model_len=128, **flags)


def assert_same_logits(reference: ModelRunner, other: ModelRunner) -> None:
    """A prefill past the window (8 tokens), a chunk continuing it, a decode beside a fresh prompt and two
    decode-only steps give `reference`'s logits; each sampling chunk appends reference's greedy token."""
    g = torch.Generator().manual_seed(0)
    a, b = (Sequence(name, 0, torch.randint(3, 200, (n,), generator=g).tolist(), SamplingConfig())
            for name, n in (("a", 30), ("b", 21)))  # fmt: skip
    a.block_ids, b.block_ids = list(range(1, 10)), list(range(10, 17))
    steps = [
        lambda: [Chunk(a, 0, 19)],
        lambda: [Chunk(a, 19, 11)],
        lambda: [Chunk(a, 30, 1), Chunk(b, 0, 21)],
        lambda: [Chunk(a, 31, 1), Chunk(b, 21, 1)],
        lambda: [Chunk(a, 32, 1), Chunk(b, 22, 1)],
    ]
    with torch.inference_mode():
        for step in steps:
            chunks = step()
            expected, got = (r.execute(chunks).float() for r in (reference, other))
            torch.testing.assert_close(got, expected, atol=TOLERANCE, rtol=TOLERANCE)
            for row, chunk in enumerate(c for c in chunks if c.samples):
                chunk.seq.append(int(expected[row].argmax()))


@pytest.mark.parametrize("family", ["gemma2", "gpt_oss", "glm4_moe", "deepseek_v3", "qwen3_moe"])
def test_kernels_equal_the_sdpa_backend(family):
    """Gemma 2: a window on every other layer and soft-capped scores; gpt-oss: a window on every other layer and
    sinks; Qwen3 MoE: each q and k head normed inside rope_store; GLM-4.5: partial rotary (rope_store rotates the reordered heads), grouped routing, shared experts;
    DeepSeek V3: MLA's expanded, zero-padded heads and its own scale."""
    model = tiny(family).to(DEVICE, DTYPE)
    sdpa, kernels = runner(model, cuda_graphs=False), runner(model, cuda_graphs=False)
    layer, kind = kernels.model.layer0, kernels.model.family
    shape = (layer.num_heads, layer.num_kv_heads, layer.head_dim, kind.attention_scale, kind.attention_softcap)
    kernels.backend = make_backend("triton", *shape)
    assert_same_logits(sdpa, kernels)


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs need CUDA")
@pytest.mark.parametrize(
    "family", ["gemma2", "gemma3", "gpt_oss", "mistral", "glm4_moe", "deepseek_v3", "qwen3", "qwen3_moe"]
)
def test_graphs_on_the_kernels_equal_the_eager_sdpa_backend(family):
    """`--attention triton` with decode graphs and piecewise mixed-step graphs, which pass each layer's window and
    sinks to the attention between their pieces (Gemma 3: two RoPE tables; Mistral: every layer windowed; GLM-4.5:
    the fused MoE's routing and shared experts captured; DeepSeek V3: MLA's expansion captured; Qwen3: q/k norms in rope_store; Qwen3 MoE: a one-row step's norm and
    router as one skinny kernel)."""
    model = tiny(family).to(DEVICE, DTYPE)
    graphs = runner(model, cuda_graphs=True, attention="triton", mixed_step_graphs_up_to=64)
    assert_same_logits(runner(model, cuda_graphs=False), graphs)
    assert graphs.pieces is not None and graphs.pieces.graphs and graphs.graphs  # both kinds of graph replayed


@pytest.mark.skipif(DEVICE != "cuda", reason="the skinny kernels run on CUDA")
@pytest.mark.parametrize("quantization", ["none", "fp8"])
def test_one_row_mixture_steps_equal_the_sdpa_backend(quantization):
    """Qwen3 MoE decoding one row (the skinny kernels' case: the norm and router as one GEMV; under fp8 the
    o_proj's split output reaches the mixture's norm, which the skinny router leaves to the unfused path)."""
    model = tiny("qwen3_moe").to(DEVICE, DTYPE)
    reference = runner(model, cuda_graphs=False, quantization=quantization)
    kernels = runner(model, cuda_graphs=True, attention="triton", quantization=quantization)
    # fp8: each backend quantizes its activations in its own kernels (0.094 apart at most on the H100)
    tolerance = TOLERANCE if quantization == "none" else 0.15
    prompt = torch.randint(3, 200, (9,), generator=torch.Generator().manual_seed(0)).tolist()
    a = Sequence("a", 0, prompt, SamplingConfig())
    a.block_ids = list(range(1, 6))
    with torch.inference_mode():
        for start, length in ((0, 9), (9, 1), (10, 1), (11, 1)):
            chunks = [Chunk(a, start, length)]
            expected, got = (r.execute(chunks).float() for r in (reference, kernels))
            torch.testing.assert_close(got, expected, atol=tolerance, rtol=tolerance)
            a.append(int(expected[0].argmax()))
