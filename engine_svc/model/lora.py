"""LoRA adapters on the fast path: PEFT folders read, checked, and applied per row of a step.

A PEFT LoRA folder (`adapter_config.json` + `adapter_model.safetensors`, as `peft.save_pretrained` writes it)
adds to a projection W the update scale * B @ A (A: [r, in], B: [out, r]; scale lora_alpha / r, or
lora_alpha / sqrt(r) with `use_rslora`). Served as vLLM serves it: the base weights stay as they are and each row
of a step that runs with an adapter gets y += (x @ A^T) @ B^T * scale, the rows grouped by adapter (one gather,
two small matmuls and one index_add per adapter and projection; no kernel of our own). The fused qkv and gate_up
take an adapter's parts as one stacked A and a block B, so one pair of matmuls serves q, k and v together.

Read with safetensors and json (the format's own files; PEFT itself is not needed to serve). Taken: `r`,
`lora_alpha`, `use_rslora`, `target_modules` among q/k/v/o_proj and gate/up/down_proj (a list or PEFT's regex
string: the weights' names say which modules are hit), `layers_to_transform`. Refused by name (`LoraRefused`):
any other `peft_type`, `use_dora`, `bias` other than none, `modules_to_save`, `rank_pattern` / `alpha_pattern`,
`fan_in_fan_out`, `layer_replication`, a rank over --max-lora-rank, embeddings or the vocabulary head as targets,
and a weight whose name or shape is not a target projection's.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

# PEFT's module name -> (the fused decoder's projection it joins, its part's index in that projection's output).
TARGETS = {
    "q_proj": ("qkv", 0),
    "k_proj": ("qkv", 1),
    "v_proj": ("qkv", 2),
    "o_proj": ("o_proj", 0),
    "gate_proj": ("gate_up", 0),
    "up_proj": ("gate_up", 1),
    "down_proj": ("down", 0),
}
_KEY = re.compile(r"(?:.*\.)?layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")
# Fields whose value must be PEFT's default (none, empty, false): each names a feature the engine does not apply.
_OFF = ("use_dora", "modules_to_save", "rank_pattern", "alpha_pattern", "fan_in_fan_out", "layer_replication")


class LoraRefused(ValueError):
    """An adapter the engine cannot serve exactly; the message names the field, flag or weight."""


@dataclass
class LoraAdapter:
    name: str
    path: str
    rank: int
    scale: float
    # (layer, PEFT module name) -> (A [r, in], B [out, r]), as stored (float32 copies are made on attach)
    weights: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    base_model_name: str = ""


def read_adapter(name: str, path: str | Path, max_rank: int) -> LoraAdapter:
    """The PEFT LoRA folder at `path`, checked (LoraRefused naming what it cannot serve)."""
    from safetensors.torch import load_file

    folder = Path(path)
    config_file, weights_file = folder / "adapter_config.json", folder / "adapter_model.safetensors"
    for needed in (config_file, weights_file):
        if not needed.is_file():
            raise LoraRefused(f"LoRA adapter {name!r}: no {needed.name} in {str(folder)[:200]!r}")
    config = json.loads(config_file.read_text())
    if (kind := config.get("peft_type", "LORA")) != "LORA":
        raise LoraRefused(f"LoRA adapter {name!r}: peft_type {str(kind)[:40]!r} (only LORA is served)")
    if config.get("bias", "none") != "none":
        raise LoraRefused(f"LoRA adapter {name!r}: bias {str(config['bias'])[:40]!r} (only 'none' is served)")
    for key in _OFF:
        if config.get(key):
            raise LoraRefused(f"LoRA adapter {name!r}: {key} is set (not served)")
    rank = int(config.get("r", 0))
    if rank < 1 or rank > max_rank:
        raise LoraRefused(f"LoRA adapter {name!r}: rank r={rank} is over --max-lora-rank {max_rank}")
    targets = config.get("target_modules") or []
    if isinstance(targets, list) and (other := sorted(set(targets) - set(TARGETS))):
        raise LoraRefused(f"LoRA adapter {name!r}: target_modules {other[:4]} (served: {', '.join(TARGETS)})")
    alpha = float(config.get("lora_alpha", rank))
    scale = alpha / math.sqrt(rank) if config.get("use_rslora") else alpha / rank
    adapter = LoraAdapter(name, str(folder), rank, scale, base_model_name=config.get("base_model_name_or_path") or "")
    halves: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for key, tensor in load_file(str(weights_file)).items():
        match = _KEY.match(key)
        if match is None or match.group(2) not in TARGETS:
            raise LoraRefused(f"LoRA adapter {name!r}: weight {key[:160]!r} is not a served target's")
        halves.setdefault((int(match.group(1)), match.group(2)), {})[match.group(3)] = tensor
    for (layer, module), pair in halves.items():
        a, b = pair.get("A"), pair.get("B")
        if a is None or b is None or a.dim() != 2 or b.dim() != 2 or a.shape[0] != rank or b.shape[1] != rank:
            raise LoraRefused(f"LoRA adapter {name!r}: layer {layer} {module}'s lora_A / lora_B are not rank {rank}")
        adapter.weights[(layer, module)] = (a, b)
    if not adapter.weights:
        raise LoraRefused(f"LoRA adapter {name!r}: adapter_model.safetensors holds no LoRA weights")
    return adapter


@dataclass
class LoraRows:
    """A step's rows by adapter: (adapter id, the rows' indices on the device, or None for every row)."""

    groups: list[tuple[int, torch.Tensor | None]] = field(default_factory=list)

    def set(self, row_ids: list[int], device: torch.device) -> None:
        """Each flat-batch row's adapter id (0: the base model) -> groups."""
        ids = set(row_ids) - {0}
        if not ids:
            self.groups = []
        elif len(ids) == 1 and 0 not in row_ids:
            self.groups = [(ids.pop(), None)]
        else:
            self.groups = [
                (i, torch.tensor([r for r, a in enumerate(row_ids) if a == i], dtype=torch.long, device=device))
                for i in sorted(ids)
            ]


class LoraProjection(nn.Module):
    """A projection (its output made of `widths` parts: q, k, v or gate, up) plus, on each adapter's rows, that
    adapter's low-rank update."""

    def __init__(self, base, widths: list[int], rows: LoraRows, row_order: list[torch.Tensor | None]):
        super().__init__()
        self.base, self.widths, self.rows, self.row_order = base, widths, rows, row_order
        self.weight, self.bias = base.weight, base.bias  # a Projection to NormedProjection and friends
        self.adapters: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id -> (A stacked, B scaled, blocked)

    def add(self, adapter_id: int, parts: list[tuple[torch.Tensor, torch.Tensor] | None], scale: float) -> None:
        """Parts in output order, each (A, B) or None (not a target): one stacked A, one block B (scale folded)."""
        weight = self.base.weight
        present = [(i, p) for i, p in enumerate(parts) if p is not None]
        rank = sum(a.shape[0] for _, (a, _) in present)
        stacked = torch.empty(rank, weight.shape[1], dtype=weight.dtype, device=weight.device)
        block = torch.zeros(sum(self.widths), rank, dtype=weight.dtype, device=weight.device)
        starts = [sum(self.widths[:i]) for i in range(len(self.widths))]
        col = 0
        for i, (a, b) in present:
            if a.shape[1] != weight.shape[1] or b.shape[0] != self.widths[i]:
                raise LoraRefused(f"shapes {tuple(a.shape)} / {tuple(b.shape)} do not fit the model's projection")
            if (order := self.row_order[i]) is not None:
                b = b[order]
            stacked[col : col + a.shape[0]] = a.to(weight.device, weight.dtype)
            block[starts[i] : starts[i] + self.widths[i], col : col + a.shape[0]] = (b.float() * scale).to(
                weight.device, weight.dtype
            )
            col += a.shape[0]
        self.adapters[adapter_id] = (stacked, block)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        for adapter_id, rows in self.rows.groups:
            pair = self.adapters.get(adapter_id)
            if pair is None:
                continue
            a, b = pair
            if rows is None:
                out = out + (x @ a.t()) @ b.t()
            else:
                out = out.index_add(0, rows, (x.index_select(0, rows) @ a.t()) @ b.t())
        return out


class Loras:
    """A fused decoder's layers with every target projection wrapped (LoraProjection, sharing one LoraRows), and
    the adapters attached to them by id. Dense attention and MLPs only: a mixture of experts' or latent
    attention's projections are not wrapped, so such a model refuses --enable-lora."""

    def __init__(self, model):
        self.rows = LoraRows()
        self.attached: set[int] = set()  # the ids of the adapters attached
        self.num_layers = len(model.layers)
        self.projections: list[dict[str, LoraProjection]] = []
        for layer in model.layers:
            if layer.mla is not None or layer.mlp_kind == "moe":
                raise LoraRefused("--enable-lora: LoRA is served for dense models (no mixture of experts, no MLA)")
            q_rows = _head_rows(layer.head_order, layer.num_heads)
            k_rows = _head_rows(layer.head_order, layer.num_kv_heads)
            qkv = LoraProjection(layer.qkv.linear, [layer.q_size, layer.kv_size, layer.kv_size], self.rows,
                                 [q_rows, k_rows, None])  # fmt: skip
            layer.qkv.linear = qkv
            o_proj = layer.o_proj = LoraProjection(layer.o_proj, [layer.o_proj.weight.shape[0]], self.rows, [None])
            mlp = layer.gate_up.linear
            fused = mlp.fused if layer.mlp_kind == "gelu" else mlp
            half = fused.weight.shape[0] // 2
            gate_up = LoraProjection(fused, [half, half], self.rows, [None, None])
            if layer.mlp_kind == "gelu":
                mlp.fused = gate_up
            else:
                layer.gate_up.linear = gate_up
            down = layer.down = LoraProjection(layer.down, [layer.down.weight.shape[0]], self.rows, [None])
            self.projections.append({"qkv": qkv, "o_proj": o_proj, "gate_up": gate_up, "down": down})

    def add(self, adapter_id: int, adapter: LoraAdapter) -> None:
        """Attach `adapter` under `adapter_id` (> 0); LoraRefused where its weights do not fit this model."""
        for layer, _ in adapter.weights:
            if layer >= self.num_layers:
                raise LoraRefused(f"LoRA adapter {adapter.name!r}: layer {layer} (the model has {self.num_layers})")
        try:
            for index, projections in enumerate(self.projections):
                for target, projection in projections.items():
                    modules = [m for m, (t, _) in TARGETS.items() if t == target]
                    parts = [adapter.weights.get((index, m)) for m in modules]
                    if any(p is not None for p in parts):
                        projection.add(adapter_id, parts, adapter.scale)
        except LoraRefused as error:
            self.remove(adapter_id)
            raise LoraRefused(f"LoRA adapter {adapter.name!r}: {error}") from None
        self.attached.add(adapter_id)

    def remove(self, adapter_id: int) -> None:
        self.attached.discard(adapter_id)
        for projections in self.projections:
            for projection in projections.values():
                projection.adapters.pop(adapter_id, None)


def _head_rows(order: torch.Tensor | None, heads: int) -> torch.Tensor | None:
    """The rows of a projection of `heads` heads with each head's dims in `order` (rope.head_rows' order)."""
    if order is None:
        return None
    width = order.numel()
    return (torch.arange(heads)[:, None] * width + order).flatten()
