"""MXFP4 experts (gpt-oss's format): the layout against transformers' dequantization, the grouped GEMM's widening
against the dequantized experts (Triton's interpreter on the CPU: `TRITON_INTERPRET=1`, as test_triton_moe.py;
CUDA in bf16), and a tiny gpt-oss saved as an MXFP4 checkpoint, loaded as the engine loads it and served on the
paged path with transformers' greedy tokens over the checkpoint's values."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers.integrations.mxfp4 import convert_moe_packed_tensors

from engine_svc.model import mxfp4
from engine_svc.model.moe import Gating, Routing, grouped_experts, route
from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence
from engine_svc.serving.loader import _check_quantization_flags, build_engine, load_engine, load_hf_model
from tests.engine.conftest import engine_args, tiny_llama
from tests.engine.families import greedy, tiny

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32
KERNEL = DEVICE == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"
PROMPT = [1] + [(7 * j) % 200 + 3 for j in range(21)]


def _random_mxfp4(*rows: int, inner: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random packed bytes and exponents near 2^-3 (an expert's weights' scale)."""
    generator = torch.Generator().manual_seed(seed)
    packed = torch.randint(0, 256, (*rows, inner // 2), dtype=torch.uint8, generator=generator)
    return packed, torch.randint(120, 126, (*rows, inner // 32), dtype=torch.uint8, generator=generator)


def test_the_layout_is_transformers_and_a_dequantized_checkpoint_quantizes_back_exactly():
    packed, scales = _random_mxfp4(3, 16, inner=64)
    values = mxfp4.dequantize(packed, scales, torch.bfloat16)
    blocks = packed.unflatten(-1, (-1, 16))  # the checkpoint's *_blocks: [experts, out, in / 32, 16]
    assert torch.equal(values, convert_moe_packed_tensors(blocks, scales, dtype=torch.bfloat16).transpose(1, 2))
    assert torch.equal(mxfp4.dequantize(*mxfp4.quantize(values), torch.bfloat16), values)
    weight = torch.randn(4, 64) * 0.02  # off the grid: within e2m1's rounding (a quarter of the group's largest)
    assert (mxfp4.dequantize(*mxfp4.quantize(weight), torch.float32) - weight).abs().max() < 0.25 * 0.06


@pytest.mark.skipif(not KERNEL, reason="the Triton kernels need CUDA (or TRITON_INTERPRET=1)")
@pytest.mark.parametrize(("tokens", "biased"), [(1, True), (40, False), (40, True)])
def test_the_kernel_widens_mxfp4_as_the_dequantized_experts(tokens, biased):
    from engine_svc.model.triton_moe import fused_experts

    experts, hidden, inner, top_k = 8, 64, 96, 2  # inner: 3 groups, not a multiple of the 64-wide tiles
    gate_up = _random_mxfp4(experts, 2 * inner, inner=hidden, seed=1)
    down = _random_mxfp4(experts, hidden, inner=inner, seed=2)
    torch.manual_seed(3)
    x = torch.randn(tokens, hidden, dtype=DTYPE)
    weights, ids = route(x, torch.randn(experts, hidden, dtype=DTYPE), Routing("softmax", top_k, True))
    gating, biases = (Gating(1.702, 7.0), (torch.randn(experts, 2 * inner), torch.randn(experts, hidden))) if biased \
        else (Gating(), (None, None))  # fmt: skip
    wide = [mxfp4.dequantize(*w, torch.float32) for w in (gate_up, down)]
    expected = grouped_experts(x.float(), *wide, weights.float(), ids, gating, *biases)
    on = [t.to(DEVICE) for t in (x, *gate_up, *down, weights, ids)]
    got = fused_experts(on[0], on[1], on[3], *on[5:], gating, *[None if b is None else b.to(DEVICE, DTYPE) for b in biases],
                        on[2], on[4])  # fmt: skip
    # the CPU's grouped path dequantizes the same way
    cpu = grouped_experts(x.float(), gate_up[0], down[0], weights.float(), ids, gating, *biases, gate_up[1], down[1])
    torch.testing.assert_close(cpu, expected)
    tolerance = 3e-2 if DEVICE == "cuda" else 1e-4
    torch.testing.assert_close(got.float().cpu(), expected, rtol=tolerance, atol=tolerance * expected.abs().max())


def _mxfp4_checkpoint(folder: Path):
    """A tiny gpt-oss whose experts lie on the MXFP4 grid, saved as gpt-oss ships: `*_blocks` [experts, out, in / 32,
    16] and `*_scales` in place of the experts' weights, quantization_config declaring mxfp4. Returns the model."""
    model = tiny("gpt_oss")
    model.save_pretrained(folder)
    tensors = load_file(folder / "model.safetensors")
    for name in [name for name in tensors if name.endswith(("gate_up_proj", "down_proj"))]:
        packed, scales = mxfp4.quantize(tensors.pop(name).transpose(1, 2))  # transformers': [experts, in, out]
        tensors[f"{name}_blocks"], tensors[f"{name}_scales"] = packed.unflatten(-1, (-1, 16)).contiguous(), scales
        with torch.no_grad():  # the reference holds the checkpoint's values
            model.get_parameter(name).copy_(mxfp4.dequantize(packed, scales, torch.float32).transpose(1, 2))
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]}
    (folder / "config.json").write_text(json.dumps(config))
    return model


@pytest.mark.parametrize("packed", [True, False])  # False: transformers widens the experts, the engine packs again
def test_an_mxfp4_checkpoint_serves_its_experts_4_bit_with_transformers_greedy_tokens(tmp_path, packed):
    model = _mxfp4_checkpoint(tmp_path)
    loaded = load_hf_model(tmp_path, torch.device("cpu"), torch.float32, False, packed_experts=packed)
    experts = loaded.model.layers[0].mlp.experts
    assert hasattr(experts, "gate_up_proj_blocks") == packed and hasattr(experts, "gate_up_proj") != packed
    quantization = _check_quantization_flags(_flags("none"), "paged", loaded.config, torch.device("cpu"), torch.float32)
    assert quantization == "mxfp4"  # the checkpoint's, as vLLM takes it
    runner = ModelRunner(
        loaded, block_size=4, num_blocks=16, max_num_seqs=1, max_model_len=64, cuda_graphs=False,
        quantization=quantization,
    )  # fmt: skip
    moe = runner.model.layer0.gate_up.linear
    assert moe.gate_up.dtype == moe.down.dtype == torch.uint8  # held 4-bit
    seq = Sequence("a", 0, list(PROMPT), SamplingConfig())
    seq.block_ids = list(range(1, 9))
    with torch.inference_mode():
        row = runner.execute([Chunk(seq, 0, len(PROMPT))])[0]
        for _ in range(5):
            seq.append(int(row.argmax()))
            row = runner.execute([Chunk(seq, seq.num_tokens - 1, 1)])[0]
        seq.append(int(row.argmax()))
    assert seq.output_ids == greedy(model, PROMPT, 6)


def test_the_engine_loads_an_mxfp4_checkpoint_packed_and_says_so(tmp_path):
    _mxfp4_checkpoint(tmp_path)
    loaded = load_engine(engine_args("--model", str(tmp_path), "--max-model-len", "64", "--engine-core", "thread"))
    assert (loaded.quantization, loaded.backend) == ("mxfp4", "paged")  # GetModelInfo.quantization
    runner = loaded.engine.runner
    assert isinstance(runner, ModelRunner) and runner.model.layer0.gate_up.linear.gate_up.dtype == torch.uint8
    with pytest.raises(ValueError, match="--quantization fp8: the checkpoint's quantization_config declares mxfp4"):
        load_engine(engine_args("--model", str(tmp_path), "--quantization", "fp8"))


def _flags(quantization: str) -> SimpleNamespace:
    return SimpleNamespace(quantization=quantization, kv_cache_dtype="auto")


def test_mxfp4_is_the_checkpoints_and_gpt_oss_only():
    gpt_oss, cpu = tiny("gpt_oss").config, torch.device("cpu")
    assert _check_quantization_flags(_flags("mxfp4"), "paged", gpt_oss, cpu, torch.float32) == "mxfp4"
    gpt_oss.quantization_config = {"quant_method": "mxfp4", "modules_to_not_convert": ["router"]}
    assert _check_quantization_flags(_flags("none"), "paged", gpt_oss, cpu, torch.float32) == "mxfp4"
    assert _check_quantization_flags(_flags("none"), "transformers", gpt_oss, cpu, torch.float32) == "none"
    with pytest.raises(ValueError, match="declares mxfp4"):
        _check_quantization_flags(_flags("fp8"), "paged", gpt_oss, cpu, torch.float32)
    with pytest.raises(ValueError, match="--quantization mxfp4: MXFP4 experts are gpt-oss's; this model is llama"):
        build_engine(tiny_llama(), engine_args("--quantization", "mxfp4"), model_name="t")
