"""A running model's weights by their checkpoint names, loaded in place; and parked out of memory while asleep.

`slots(runner)`: Hugging Face checkpoint name -> the tensor a weight update writes. The fused decoder keeps q/k/v
and gate/up as one matrix each, so those names are row slices of it: views, so a copy writes the fused matrix in
place, and CUDA graphs captured over the weights stay valid. `load` checks every tensor against its slot before
writing any. `Parked`: the model's parameter storages released (kept on the host first, or dropped) and given
back (new addresses: the runner's graphs are captured again, `Memory.recapture`, and slots taken again).
Runners are told apart by type here (not a Runner method) so that a runner change never touches this module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import torch
from torch import nn

from engine_svc.model.hf_runner import TransformersRunner
from engine_svc.model.runner import ModelRunner
from scaleout_common.errors import quote
from scaleout_common.reasons import Reason, fail


def slots(runner) -> dict[str, torch.Tensor]:
    if isinstance(runner, TransformersRunner):
        return {name: t for name, t in runner.model.state_dict(keep_vars=True).items() if t.is_floating_point()}
    if not isinstance(runner, ModelRunner):
        raise fail(Reason.WEIGHT_TRANSFER_UNAVAILABLE, f"a {type(runner).__name__} takes no weight updates")
    return _fused_slots(runner.model)


def _rows(weight: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    return list(weight.split(sizes, 0))


def _fused_slots(model) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {"model.embed_tokens.weight": model.embed.weight}
    for i, layer in enumerate(model.layers):
        prefix = f"model.layers.{i}."
        if layer.mlp_kind == "moe" or layer.head_order is not None:  # no slots for experts or reordered heads yet
            raise fail(
                Reason.WEIGHT_TRANSFER_UNAVAILABLE,
                "a mixture of experts or a partial-rotary model takes no weight updates yet",
            )
        qkv, gate_up = layer.qkv.linear, layer.gate_up.linear
        if any(p.weight.itemsize == 1 for p in (qkv, gate_up, layer.o_proj, layer.down)):
            raise fail(
                Reason.WEIGHT_TRANSFER_UNAVAILABLE, "fp8 projections (--quantization fp8) take no weight updates"
            )
        split = [layer.q_size, layer.kv_size, layer.kv_size]
        half = gate_up.weight.shape[0] // 2
        parts = {
            "self_attn.q_proj": 0,
            "self_attn.k_proj": 1,
            "self_attn.v_proj": 2,
        }
        for kind in ("weight", "bias"):
            fused = getattr(qkv, kind)
            if fused is not None:
                views = _rows(fused, split)
                out.update((f"{prefix}{name}.{kind}", views[k]) for name, k in parts.items())
            fused = getattr(gate_up, kind)
            if fused is not None:
                out[f"{prefix}mlp.gate_proj.{kind}"], out[f"{prefix}mlp.up_proj.{kind}"] = _rows(fused, [half, half])
            for name, module in (("self_attn.o_proj", layer.o_proj), ("mlp.down_proj", layer.down)):
                if getattr(module, kind, None) is not None:
                    out[f"{prefix}{name}.{kind}"] = getattr(module, kind)
        out[f"{prefix}input_layernorm.weight"] = layer.qkv.norm.weight
        out[f"{prefix}post_attention_layernorm.weight"] = layer.gate_up.norm.weight
    out["model.norm.weight"] = model.head.norm.weight
    out["lm_head.weight"] = model.head.linear.weight  # the embedding itself when tied
    if model.head.linear.bias is not None:
        out["lm_head.bias"] = model.head.linear.bias
    return out


def check(targets: dict[str, torch.Tensor], names: Iterable[str], shapes: Iterable[Iterable[int]]) -> None:
    """INVALID_WEIGHTS unless every name has a slot of that shape."""
    for name, shape in zip(names, shapes):
        slot = targets.get(name)
        if slot is None:
            raise fail(Reason.INVALID_WEIGHTS, f"the model has no tensor {quote(name)}", "names")
        if tuple(slot.shape) != tuple(shape):
            got, want = list(shape), list(slot.shape)
            raise fail(Reason.INVALID_WEIGHTS, f"{quote(name)} has shape {want} here, not {got}", "shapes")


@torch.no_grad()
def load(targets: dict[str, torch.Tensor], tensors: Iterable[tuple[str, torch.Tensor]]) -> int:
    """Copy each (name, tensor) into its slot (converting its dtype and device); the number copied."""
    count = 0
    for name, tensor in tensors:
        targets[name].copy_(tensor)
        count += 1
    return count


def digests(targets: dict[str, torch.Tensor]) -> dict[str, str]:
    """Name -> SHA-256 (hex) of the tensor's bytes: vLLM's weight_checksum digest, so a trainer's digest of its own
    tensor (same dtype) matches."""
    return {
        name: hashlib.sha256(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().data).hexdigest()
        for name, t in targets.items()
    }


@torch.no_grad()
def zero(targets: dict[str, torch.Tensor]) -> None:
    for tensor in targets.values():
        tensor.zero_()


class Parked:
    """`module`'s parameters released: kept on the host (`keep`) or dropped; `restore` gives each its memory back,
    with the host copy (kept) or uninitialised (dropped: a weight update must follow). Each parameter's data is
    swapped (not its storage resized: the server's storages may be shared with numpy, hence not resizable), so
    every module holding the parameter sees the change; views of the old data (weight slots) are stale after."""

    def __init__(self, module: nn.Module, keep: bool):
        self.params = list(module.parameters())  # deduplicated: a tied weight once
        self.shapes = [(p.shape, p.dtype, p.device) for p in self.params]
        # Kept: a host copy (pinned when it comes from the GPU, so waking copies at full speed).
        self.host = [_host_copy(p.data) for p in self.params] if keep else []
        for p in self.params:
            p.data = torch.empty(0, dtype=p.dtype, device=p.device)

    @torch.no_grad()
    def restore(self) -> None:
        for i, (p, (shape, dtype, device)) in enumerate(zip(self.params, self.shapes)):
            p.data = self.host[i].to(device) if self.host else torch.empty(shape, dtype=dtype, device=device)
        self.host = []


def _host_copy(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.device.type != "cuda":
        return tensor.clone()
    return torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True).copy_(tensor)


class Memory:
    """What Sleep releases in one runner: its KV cache (the paged runner's; the transformers runner's caches are
    per sequence and go with them) and its weights."""

    def __init__(self, runner):
        self.runner = runner
        self.kv_blocks = (0, 0)  # the paged cache's size while released (ModelRunner.kv_blocks)
        self.weights: Parked | None = None

    def module(self) -> nn.Module:
        return self.runner.model

    def free_kv(self) -> None:
        runner = self.runner
        if isinstance(runner, ModelRunner) and runner.kv_caches:
            self.kv_blocks = runner.kv_blocks
            runner.graphs.clear()  # captured over the cache that goes now
            if runner.pieces is not None:
                runner.pieces.forget()
            runner.kv_caches = []
            _empty_cache(runner.device)

    def restore_kv(self) -> None:
        if isinstance(self.runner, ModelRunner) and self.kv_blocks[0]:
            self.runner.allocate_kv(*self.kv_blocks)
            self.kv_blocks = (0, 0)

    def park_weights(self, keep: bool) -> None:
        if self.weights is None:
            self.weights = Parked(self.module(), keep)
            _empty_cache(self.runner.device)

    def restore_weights(self) -> None:
        if self.weights is not None:
            self.weights.restore()
            self.weights = None

    def recapture(self) -> None:
        """With weights and cache both in place again: the paged runner's CUDA graphs captured over them."""
        runner = self.runner
        if isinstance(runner, ModelRunner) and runner.kv_caches and self.weights is None:
            runner.graphs.clear()
            if runner.pieces is not None:
                runner.pieces.forget()
            runner.warm_up()


def _empty_cache(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
