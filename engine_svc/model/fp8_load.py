"""FP8 checkpoints as operators deploy them (fp8_config.py: which layout), read into the model's dtype at load.

Each quantized `<name>.weight` is float8_e4m3fn beside its scale: block-wise (DeepSeek V3/R1, Kimi K2, Qwen3-*-FP8,
llm-compressor's FP8-block) `<name>.weight_scale_inv` (or `.weight_scale`) [ceil(out / bm), ceil(in / bn)] float32,
one scale per block (the last row and column of blocks may be partial, as DeepSeek's 576-row kv_a_proj_with_mqa's),
value = weight * scale over its block; else `<name>.weight_scale`, a scalar or one per output row, and perhaps a
static `<name>.input_scale`. Tensors without a scale (embeddings, norms, routers, the ignored modules) are as
they are.

`load_fp8` hands transformers a state dict whose quantized weights are dequantized one at a time as it
materializes them, so transformers' own renames and expert merges apply and memory peaks at the model in its dtype
(one tensor's float32 copy above it); the engine then quantizes the projections again under --quantization fp8
(each row's scale: the values differ from the checkpoint's by that second e4m3 rounding). A static `input_scale`
goes unused: activations get per-token scales.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from engine_svc.model.fp8_config import Fp8Scheme, fp8_scheme

SCALES = (".weight_scale_inv", ".weight_scale")
UNUSED = (".input_scale", ".activation_scale")  # static activation scales: the engine scales each token's own


def dequantize(weight: torch.Tensor, scale: torch.Tensor, block: tuple[int, int] | None) -> torch.Tensor:
    """float32 values of an e4m3 `weight` [..., out, in] and its scale: per block [..., ceil(out / bm),
    ceil(in / bn)] (edge blocks may be partial), else a scalar or one per output row."""
    scale = _float_scale(scale)
    rows, cols = weight.shape[-2:]
    if block is None:
        if scale.numel() not in (1, rows):
            raise ValueError(f"a per-tensor scale of shape {list(scale.shape)} for a weight of {rows} rows")
        return weight.float() * (scale.reshape(()) if scale.numel() == 1 else scale.reshape(rows, 1))
    grid = (-(-rows // block[0]), -(-cols // block[1]))
    if tuple(scale.shape[-2:]) != grid:
        raise ValueError(f"a weight of {[rows, cols]} in blocks of {list(block)} has {list(grid)} scales, not "
                         f"{list(scale.shape[-2:])}")  # fmt: skip
    wide = scale.repeat_interleave(block[0], -2)[..., :rows, :].repeat_interleave(block[1], -1)[..., :cols]
    return weight.float() * wide


def _float_scale(scale: torch.Tensor) -> torch.Tensor:
    """float32 scales: e8m0 bytes (ue8m0 stored as uint8) are exponents 2^(s - 127)."""
    if scale.dtype == torch.uint8:
        return torch.exp2(scale.float() - 127)
    return scale.float()


class _Dequantized:
    """A checkpoint weight dequantized when transformers materializes it (`tensor[...]`, as a safetensors slice)."""

    def __init__(self, weight, scale, block):
        self.weight, self.scale, self.block = weight, scale, block

    def __getitem__(self, index):
        return dequantize(self.weight[...], self.scale[...], self.block)[index]


def lazy_state(shards, scheme: Fp8Scheme) -> dict:
    """Checkpoint name -> a safetensors slice, or _Dequantized for a weight with a scale, over open `shards`."""
    slices = {name: shard.get_slice(name) for shard in shards for name in shard.keys()}  # noqa: SIM118
    state = {}
    for name, value in slices.items():
        if name.endswith(SCALES + UNUSED):
            if name.endswith(SCALES) and name.rsplit(".", 1)[0] + ".weight" not in slices:
                raise ValueError(f"the checkpoint has {name} but not its weight")
            continue
        scale = next((slices[n] for s in SCALES if (n := name.removesuffix(".weight") + s) in slices), None)
        if scale is not None:
            if value.get_dtype() != "F8_E4M3":
                raise ValueError(f"{name} has a scale but is {value.get_dtype()}, not float8_e4m3fn")
            state[name] = _Dequantized(value, scale, scheme.block)
        elif value.get_dtype() in ("F8_E4M3", "F8_E5M2"):
            raise ValueError(f"{name} is fp8 without a scale (no {name}_scale_inv or {name}_scale)")
        else:
            state[name] = value
    return state


def load_fp8(folder: Path, config, dtype: torch.dtype):
    """The model of an fp8 checkpoint `folder` (its `config`, whose quantization_config fp8_scheme read) on the
    CPU in `dtype`, its quantized weights dequantized; the config keeps the declaration (the engine's default)."""
    from safetensors import safe_open
    from transformers import GenerationConfig

    scheme = fp8_scheme(config)
    assert scheme is not None
    declared = config.quantization_config
    del config.quantization_config  # else transformers builds its own fp8 layers
    try:
        with contextlib.ExitStack() as stack:
            files = sorted(folder.glob("*.safetensors"))
            if not files:
                raise ValueError(f"{folder}: an fp8 checkpoint is read from safetensors files; there are none")
            shards = [stack.enter_context(safe_open(str(path), "pt")) for path in files]
            model = _model_class(config).from_pretrained(None, config=config, state_dict=lazy_state(shards, scheme),
                                                         dtype=dtype)  # fmt: skip
    finally:
        config.quantization_config = declared
    model.config.quantization_config = declared
    if (folder / "generation_config.json").is_file():  # what from_pretrained reads from a folder, not a state dict
        model.generation_config = GenerationConfig.from_pretrained(folder)
    return model


def _model_class(config):
    """transformers' own causal LM class of `config` (a state dict loads into a class, not through the Auto one)."""
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.auto_factory import _get_model_class

    if type(config) not in AutoModelForCausalLM._model_mapping:
        raise ValueError(
            f"an fp8 checkpoint of {type(config).__name__} (remote code) is not read: no transformers class"
        )
    return _get_model_class(config, AutoModelForCausalLM._model_mapping)
