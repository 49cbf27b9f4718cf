"""A gpt-oss MXFP4 checkpoint loaded with its experts left packed: the experts' `*_blocks` / `*_scales` tensors
straight from the safetensors files onto the device, every other tensor as transformers would load it.

transformers' own load (without its `kernels` package, or with the fast path's need for plain tensors) widens the
experts to bf16 first: 4x their bytes, which gpt-oss-120b's (~60 GB packed) would not fit in. Here the model is
built on the meta device, each checkpoint tensor is assigned in (in the model's dtype, the packed ones as they
are), and each experts module holds the checkpoint's blocks (flattened to [experts, out, in / 2]) and scales as
buffers in place of its two weight parameters; SparseMoe takes them as they are. Such a model runs on the fast
path only (transformers' forward has no expert weights)."""

from __future__ import annotations

from pathlib import Path

import torch

PACKED = ("gate_up_proj", "down_proj")


def load_packed(folder: Path, device: torch.device, dtype: torch.dtype):
    """The gpt-oss of `folder` (an MXFP4 checkpoint) on `device` in `dtype`, its experts packed."""
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    inner = model.model
    with torch.device(device):  # computed at init, never saved (non-persistent buffers)
        inner.rotary_emb = type(inner.rotary_emb)(config)
    packed: dict[str, torch.Tensor] = {}
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), "pt", device=str(device)) as shard:
            state = {}
            for name in shard.keys():  # noqa: SIM118 (safe_open is no mapping)
                tensor = shard.get_tensor(name)
                if name.endswith(("_blocks", "_scales")):
                    packed[name] = tensor
                else:
                    state[name] = tensor.to(dtype) if tensor.is_floating_point() else tensor
            model.load_state_dict(state, strict=False, assign=True)
    for i, layer in enumerate(inner.layers):
        experts, prefix = layer.mlp.experts, f"model.layers.{i}.mlp.experts."
        for name in PACKED:
            del experts._parameters[name]
            experts.register_buffer(f"{name}_blocks", packed.pop(f"{prefix}{name}_blocks").flatten(-2))
            experts.register_buffer(f"{name}_scales", packed.pop(f"{prefix}{name}_scales"))
    if config.tie_word_embeddings:
        model.tie_weights()
    if missing := [name for name, p in model.named_parameters() if p.is_meta]:
        raise ValueError(f"{folder}: the checkpoint lacks {', '.join(missing[:4])}")
    if (folder / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(folder)
    return model.eval()


def packed_experts(experts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """(gate_up, its scales, down, its scales) of an experts module `load_packed` filled, else None."""
    if not hasattr(experts, "gate_up_proj_blocks"):
        return None
    return (experts.gate_up_proj_blocks, experts.gate_up_proj_scales, experts.down_proj_blocks,
            experts.down_proj_scales)  # fmt: skip
