"""FP8 checkpoints as published (fp8_load.py): tiny random-weight models saved block-wise (DeepSeek V3 / Kimi K2 /
Qwen3-*-FP8's layout) or per tensor, quantized here as the format defines, loaded as the engine loads them, their
logits against transformers' forward over the dequantized weights; a kimi_k2-typed folder; the refusals."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch.nn import functional as F
from transformers import AutoModelForCausalLM, DeepseekV3ForCausalLM
from transformers.integrations.finegrained_fp8 import Fp8Dequantize

from engine_svc.model.fp8_config import UnsupportedQuantization, fp8_scheme
from engine_svc.model.fp8_linear import fp8_problem
from engine_svc.model.fp8_load import dequantize
from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence
from engine_svc.serving.loader import _check_quantization_flags, load_engine, load_hf_model
from tests.engine.conftest import engine_args
from tests.engine.families import logits_of, tiny

FP8 = torch.float8_e4m3fn
CPU = torch.device("cpu")
PROMPT = [1] + [(7 * j) % 200 + 3 for j in range(19)]
# The published [128, 128], and one that divides none of the tiny widths: partial edge blocks in both dimensions, as
# DeepSeek's 576-row kv_a_proj_with_mqa has; "tensor": fp8 per tensor, static input scales (the older exports);
# "channel": compressed-tensors' FP8-dynamic (llm-compressor's, RedHatAI's), a scale per output row.
CASES = {
    "qwen3": ("qwen3", [128, 128]),
    "qwen3_moe": ("qwen3_moe", [48, 32]),
    "deepseek_v3": ("deepseek_v3", [48, 32]),
    "kimi_k2": ("deepseek_v3", [128, 128]),  # config.json as Kimi K2 ships it
    "per_tensor": ("qwen3", "tensor"),
    "compressed_tensors": ("qwen3_moe", "channel"),
}
KIMI_K2 = {"model_type": "kimi_k2", "auto_map": {
    "AutoConfig": "configuration_deepseek.DeepseekV3Config",
    "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM",
}}  # fmt: skip


def _quantize(weight: torch.Tensor, layout: list[int] | str):
    """(e4m3 weight, its scale tensor(s) by checkpoint suffix, the dequantized values): each block's (row's,
    tensor's) largest magnitude mapped to 448, value = weight * scale over the block."""
    if isinstance(layout, str):
        scale = weight.abs().amax(dim=-1, keepdim=True) if layout == "channel" else weight.abs().max()
        q = (weight / (scale / 448)).to(FP8)
        return q, {"weight_scale": scale / 448, "input_scale": torch.tensor(1.0)}, q.float() * (scale / 448)
    rows, cols = weight.shape
    padded = F.pad(weight, (0, -cols % layout[1], 0, -rows % layout[0]))
    blocks = padded.unflatten(0, (-1, layout[0])).unflatten(-1, (-1, layout[1]))  # [R, bm, C, bn]
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / 448
    q = (blocks / scale[:, None, :, None]).to(FP8)
    values = (q.float() * scale[:, None, :, None]).flatten(-2).flatten(0, 1)[:rows, :cols]
    return q.flatten(-2).flatten(0, 1)[:rows, :cols].contiguous(), {"weight_scale_inv": scale}, values.contiguous()


def _declaration(layout: list[int] | str) -> dict:
    """quantization_config as each exporter writes it."""
    if layout == "channel":
        weights = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel", "dynamic": False}
        tokens = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "token", "dynamic": True}
        group = {"targets": ["Linear"], "weights": weights, "input_activations": tokens}
        return {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
                "config_groups": {"group_0": group}, "ignore": ["lm_head"], "kv_cache_scheme": None}  # fmt: skip
    if layout == "tensor":
        return {"quant_method": "fp8", "activation_scheme": "static"}
    return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": layout,
            "modules_to_not_convert": ["lm_head"]}  # fmt: skip


def _checkpoints(tmp: Path, case: str) -> tuple[Path, Path]:
    """(the fp8 checkpoint, the same model with its dequantized weights in float32: the reference's)."""
    family, layout = CASES[case]
    fp8, plain = tmp / "fp8", tmp / "plain"
    tiny(family).save_pretrained(plain)
    tensors = load_file(plain / "model.safetensors")
    quantized = {}
    for name, tensor in tensors.items():
        if name.endswith("_proj.weight"):  # the projections, experts', shared experts' and MLA's included
            q, scales, tensors[name] = _quantize(tensor, layout)
            quantized[name] = q
            quantized.update({f"{name.removesuffix('weight')}{suffix}": s for suffix, s in scales.items()})
        else:
            quantized[name] = tensor
    save_file(tensors, plain / "model.safetensors", metadata={"format": "pt"})
    fp8.mkdir()
    save_file(quantized, fp8 / "model.safetensors", metadata={"format": "pt"})
    config = {**json.loads((plain / "config.json").read_text()), "quantization_config": _declaration(layout)}
    (fp8 / "config.json").write_text(json.dumps({**config, **KIMI_K2} if case == "kimi_k2" else config))
    return fp8, plain


def _logits(runner: ModelRunner) -> torch.Tensor:
    """A prefill then two decodes (greedy), each sampled row's logits."""
    seq = Sequence("a", 0, list(PROMPT), SamplingConfig())
    seq.block_ids = list(range(1, 7))
    with torch.inference_mode():
        rows = [runner.execute([Chunk(seq, 0, len(PROMPT))])[0]]
        for _ in range(2):
            seq.append(int(rows[-1].argmax()))
            rows.append(runner.execute([Chunk(seq, seq.num_tokens - 1, 1)])[0])
    return torch.stack(rows)


def _tokens(rows: torch.Tensor) -> list[int]:
    return PROMPT + [int(row.argmax()) for row in rows[:-1]]


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_fp8_checkpoint_loads_its_dequantized_weights_and_serves_fp8_by_default(tmp_path, case):
    fp8, plain = _checkpoints(tmp_path, case)
    loaded = load_hf_model(fp8, CPU, torch.float32, False)
    reference = AutoModelForCausalLM.from_pretrained(plain, dtype=torch.float32).eval()
    assert type(loaded) is type(reference) and loaded.config.model_type == reference.config.model_type
    if case == "kimi_k2":
        assert isinstance(loaded, DeepseekV3ForCausalLM) and loaded.config.quantization_config["quant_method"] == "fp8"
    flags = SimpleNamespace(quantization="none", kv_cache_dtype="auto")
    # the checkpoint's; dequantized where fp8 matmuls cannot run it (the tiny DeepSeek's q_lora_rank of 24)
    default = "none" if fp8_problem(loaded.config, CPU, torch.float32) else "fp8"
    assert default == ("none" if CASES[case][0] == "deepseek_v3" else "fp8")
    assert _check_quantization_flags(flags, "paged", loaded.config, CPU, torch.float32) == default
    assert _check_quantization_flags(flags, "transformers", loaded.config, CPU, torch.float32) == "none"
    method = "compressed-tensors" if case == "compressed_tensors" else "fp8"  # vLLM's names; another is refused
    named = SimpleNamespace(quantization=method, kv_cache_dtype="auto")
    if default == "fp8":
        assert _check_quantization_flags(named, "paged", loaded.config, CPU, torch.float32) == "fp8"
    else:  # asked for by name, fp8 is refused where it cannot run
        with pytest.raises(ValueError, match="--quantization fp8: fp8 matmuls need sizes that are multiples of 16"):
            _check_quantization_flags(named, "paged", loaded.config, CPU, torch.float32)
    for other in {"mxfp4", "fp8", "compressed-tensors"} - {method}:
        with pytest.raises(ValueError, match=f"--quantization {other}: the checkpoint's .* declares {method}"):
            _check_quantization_flags(SimpleNamespace(quantization=other), "paged", loaded.config, CPU, torch.float32)
    exact = _logits(
        ModelRunner(loaded, block_size=4, num_blocks=8, max_num_seqs=1, max_model_len=24, cuda_graphs=False)
    )
    expected = logits_of(reference, _tokens(exact))[len(PROMPT) - 1 :]
    torch.testing.assert_close(exact, expected, atol=2e-4, rtol=2e-4)  # the checkpoint's values, read exactly
    runner = ModelRunner(
        loaded, block_size=4, num_blocks=8, max_num_seqs=1, max_model_len=24, cuda_graphs=False, quantization="fp8"
    )
    served = _logits(runner)[0]  # quantized again per row: within e4m3's rounding (test_families' bound)
    assert (served - expected[0]).abs().max() < 0.25 * expected[0].abs().max()


def test_the_engine_serves_a_block_fp8_checkpoint_in_fp8_and_says_so(tmp_path):
    fp8, _ = _checkpoints(tmp_path, "qwen3_moe")
    loaded = load_engine(engine_args("--model", str(fp8), "--max-model-len", "64", "--engine-core", "thread"))
    assert (loaded.quantization, loaded.backend) == ("fp8", "paged")  # GetModelInfo.quantization
    runner = loaded.engine.runner
    assert isinstance(runner, ModelRunner) and runner.model.layer0.gate_up.linear.gate_up.dtype == FP8  # experts


def test_the_block_rule_is_transformers_on_whole_blocks_and_pads_partial_ones():
    torch.manual_seed(0)
    weight, scale = (torch.randn(2, 256, 384) * 100).to(FP8), torch.rand(2, 2, 3)
    ours = dequantize(weight, scale, (128, 128))
    torch.testing.assert_close(ours, Fp8Dequantize(None)._dequantize_one(weight, scale, torch.float32))
    edge = dequantize(weight[0, :200, :300], scale[0], (128, 128))  # a 200 x 300 weight keeps the 2 x 3 grid
    torch.testing.assert_close(edge, ours[0, :200, :300])
    with pytest.raises(ValueError, match=r"has \[2, 3\] scales, not \[2, 2\]"):
        dequantize(weight[0], scale[0, :, :2], (128, 128))


def _int4_group(fmt: str = "pack-quantized") -> dict:
    """compressed-tensors' W4A16 (GPTQ-style int4 weights, packed): not fp8."""
    declared = _declaration("channel")
    declared["config_groups"]["group_0"]["weights"].update(num_bits=4, type="int", strategy="group", group_size=128)
    return {**declared, "format": fmt}


@pytest.mark.parametrize(
    ("declared", "field"),
    [
        ({"quant_method": "bitsandbytes"}, "quant_method"),
        ({"quant_method": "compressed-tensors"}, "config_groups"),
        ({**_declaration("channel"), "kv_cache_scheme": {"num_bits": 8, "type": "float"}}, "kv_cache_scheme"),
        (_int4_group(), "config_groups.group_0.format"),
        (_int4_group(fmt="float-quantized"), "config_groups.group_0.weights"),
        ({"quant_method": "gptq", "bits": 4}, "quant_method"),
        ({"quant_method": "fp8", "fmt": "e5m2", "weight_block_size": [128, 128]}, "fmt"),
        ({"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": [128, 128]}, "activation_scheme"),
        ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size"),
        ({"quant_method": "fp8", "weight_block_size": [128, 128], "expert_dtype": "fp4"}, "expert_dtype"),
    ],
)
def test_a_quantization_config_the_engine_cannot_honour_is_refused_by_its_field(declared, field):
    with pytest.raises(UnsupportedQuantization) as refused:
        fp8_scheme(SimpleNamespace(quantization_config=declared))
    assert refused.value.field == f"quantization_config.{field}"


def test_deepseeks_published_declaration_reads_as_128_blocks():
    published = {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "scale_fmt": "ue8m0",
        "weight_block_size": [128, 128],
    }  # fmt: skip (DeepSeek V3.1's; V3 / R1 / Kimi K2's lack scale_fmt)
    scheme = fp8_scheme(SimpleNamespace(quantization_config=published))
    assert scheme is not None and scheme.block == (128, 128)
    assert fp8_scheme(SimpleNamespace(quantization_config=None)) is None
