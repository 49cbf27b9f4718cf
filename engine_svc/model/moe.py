"""A routed mixture of experts in place of a decoder layer's MLP (Qwen3 MoE, gpt-oss, GLM-4.5).

Each family routes by its own rule (`Routing`, read from the config: the one place that picks it). The experts
are gated MLPs stored as 3-D tensors (gate_up [experts, 2 * inner, hidden] as [gate; up], down [experts, hidden,
inner]; gpt-oss's transposed, interleaved, biased weights are brought to that layout at load), SwiGLU or gpt-oss's
clamped variant: (up + 1) * gate * sigmoid(alpha * gate). GLM-4.5's shared experts, a plain SwiGLU MLP over every
token, are added to the routed ones.

On CPU the assignments are sorted by expert and each expert that got tokens runs its two matmuls over them
(a plain grouped path: the host reads the counts). On CUDA the grouped GEMMs run in one Triton kernel each
(triton_moe.py), with no host read, so CUDA graphs capture them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engine_svc.model import mxfp4
from engine_svc.model.mxfp4_load import packed_experts


@dataclass(frozen=True)
class Gating:
    """The experts' activation: SwiGLU, or gpt-oss's clamped one where `limit` is set."""

    alpha: float = 0.0
    limit: float = 0.0

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        gate, up = h.chunk(2, dim=-1)
        if not self.limit:
            return F.silu(gate) * up
        gate, up = gate.clamp(max=self.limit), up.clamp(-self.limit, self.limit)
        return (up + 1) * gate * torch.sigmoid(gate * self.alpha)


@dataclass(frozen=True)
class Routing:
    """How a family picks each token's `top_k` experts and weighs them, as transformers does:
    - "softmax" (Qwen3 MoE): softmax over every expert's logit (float32), the top k, renormalised to sum to one
      where norm_topk_prob says;
    - "softmax_top_k" (gpt-oss): the top k of the biased logits, softmax over those k;
    - "sigmoid_groups" (GLM-4.5, DeepSeek V3): sigmoid scores (float32); experts chosen by score + the correction bias
      (e_score_correction_bias: for the choice only), among the `top_groups` of `groups` equal groups whose two
      best biased scores sum highest; weighted by their unbiased scores, renormalised where norm_topk_prob says,
      times routed_scaling_factor.
    The weights come in the model's dtype."""

    rule: str
    top_k: int
    renormalize: bool = False
    groups: int = 1
    top_groups: int = 1
    scale: float = 1.0

    @classmethod
    def of(cls, config) -> Routing:
        top_k, renormalize = config.num_experts_per_tok, bool(getattr(config, "norm_topk_prob", False))
        if config.model_type == "gpt_oss":
            return cls("softmax_top_k", top_k)
        if config.model_type in ("glm4_moe", "deepseek_v3"):
            groups, scale = (config.n_group, config.topk_group), float(config.routed_scaling_factor)
            return cls("sigmoid_groups", top_k, renormalize, *groups, scale)
        return cls("softmax", top_k, renormalize)


def route(x: torch.Tensor, router: torch.Tensor, routing: Routing, bias=None, correction=None, logits=None):
    """(weights [tokens, k] in x's dtype, expert ids [tokens, k]) of each token; `bias`: the router's (gpt-oss),
    `correction`: the choice's (GLM-4.5); `logits`: the router's, where already computed (fused with the norm)."""
    grouped = routing.rule == "sigmoid_groups"  # its scores in float32
    if logits is None:
        logits = F.linear(x.float(), router.float()) if grouped else F.linear(x, router, bias)
    if logits.is_cuda:  # one launch in place of the rule's five to sixteen
        from engine_svc.model.triton_routing import routed

        return routed(logits, routing, correction, x.dtype)
    if grouped:
        return _sigmoid_groups(logits, routing, correction, x.dtype)
    if routing.rule == "softmax_top_k":
        values, ids = torch.topk(logits, routing.top_k, dim=-1)
        return F.softmax(values, dim=-1, dtype=values.dtype), ids
    weights, ids = torch.topk(F.softmax(logits, dim=-1, dtype=torch.float32), routing.top_k, dim=-1)
    if routing.renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(x.dtype), ids


def _sigmoid_groups(logits, routing: Routing, correction, dtype):
    scores = logits.sigmoid()
    choice = scores if correction is None else scores + correction.float()
    if routing.top_groups < routing.groups:  # the other groups' experts are out of the choice
        grouped = choice.view(choice.shape[0], routing.groups, -1)
        best = grouped.topk(2, dim=-1)[0].sum(dim=-1).topk(routing.top_groups, dim=-1)[1]
        keep = torch.zeros(grouped.shape[:2], dtype=torch.bool, device=logits.device).scatter_(1, best, True)
        choice = grouped.masked_fill(~keep[..., None], float("-inf")).flatten(1)
    ids = torch.topk(choice, routing.top_k, dim=-1)[1]
    weights = scores.gather(1, ids)
    if routing.renormalize:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return (weights * routing.scale).to(dtype), ids


def grouped_experts(
    x,
    gate_up,
    down,
    weights,
    ids,
    gating=Gating(),
    gate_up_bias=None,
    down_bias=None,
    gate_up_scale=None,
    down_scale=None,
):
    """sum over each token's k experts of weight * down(gating(gate_up(x))), one pair of matmuls per expert hit;
    fp8 experts (`*_scale`: [experts, out], each weight row's) and MXFP4 ones (uint8 weights, `*_scale` their e8m0
    group exponents: mxfp4.py) are dequantized an expert at a time."""
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=gate_up.shape[0]).tolist()
    tokens = order // ids.shape[1]
    scale = weights.flatten()[order, None]
    out = torch.zeros_like(x)
    start = 0
    for expert, count in enumerate(counts):
        if not count:
            continue
        rows = tokens[start : start + count]
        w1, w2 = _dequantized(gate_up, gate_up_scale, expert, x.dtype), _dequantized(down, down_scale, expert, x.dtype)
        h = F.linear(x[rows], w1, None if gate_up_bias is None else gate_up_bias[expert])
        y = F.linear(gating(h), w2, None if down_bias is None else down_bias[expert])
        out.index_add_(0, rows, y * scale[start : start + count])
        start += count
    return out


def _dequantized(weight, scale, expert: int, dtype) -> torch.Tensor:
    if scale is None:
        return weight[expert]
    if mxfp4.is_mxfp4(weight):
        return mxfp4.dequantize(weight[expert], scale[expert], dtype)
    return (weight[expert].float() * scale[expert][:, None]).to(dtype)


def _gate_then_up(t: torch.Tensor) -> torch.Tensor:
    """gpt-oss's interleaved gate and up rows (dim 1) as [gate; up]."""
    return torch.cat((t[:, 0::2], t[:, 1::2]), dim=1)


def _frozen(t: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t.detach().contiguous(), requires_grad=False)


class SparseMoe(nn.Module):
    """The experts of one layer (and its shared experts, GLM-4.5), called on the normed hidden rows [tokens,
    hidden]."""

    def __init__(self, hf_block, config):
        super().__init__()
        experts = hf_block.experts
        self.routing = Routing.of(config)
        self.bias = None  # a Projection without bias, for NormedProjection
        self.gate_up_scale: torch.Tensor | None = None  # set by to_fp8 (each row's) or to_mxfp4 (each group's)
        self.down_scale: torch.Tensor | None = None
        if hasattr(hf_block, "router"):  # gpt-oss: [experts, hidden, 2 * inner], gate and up interleaved
            self.router, self.router_bias = _frozen(hf_block.router.weight), _frozen(hf_block.router.bias)
            self.gate_up_bias = _frozen(_gate_then_up(experts.gate_up_proj_bias))
            self.down_bias = _frozen(experts.down_proj_bias)
            if (packed := packed_experts(experts)) is None:
                self.gate_up = _frozen(_gate_then_up(experts.gate_up_proj.transpose(1, 2)))
                self.down = _frozen(experts.down_proj.transpose(1, 2))
            else:  # MXFP4 as the checkpoint holds it (mxfp4_load.py): [experts, out, in / 2], out interleaved too
                self.gate_up, self.gate_up_scale = _frozen(_gate_then_up(packed[0])), _gate_then_up(packed[1])
                self.down, self.down_scale = _frozen(packed[2]), packed[3]
            self.gating = Gating(experts.alpha, experts.limit)
        else:
            self.router, self.router_bias = _frozen(hf_block.gate.weight), None
            self.gate_up, self.gate_up_bias = _frozen(experts.gate_up_proj), None
            self.down, self.down_bias = _frozen(experts.down_proj), None
            self.gating = Gating()
        correction = getattr(hf_block.gate, "e_score_correction_bias", None) if hasattr(hf_block, "gate") else None
        self.correction = None if correction is None else _frozen(correction)
        shared = getattr(hf_block, "shared_experts", None)
        self.shared_gate_up = (
            None if shared is None else _frozen(torch.cat((shared.gate_proj.weight, shared.up_proj.weight)))
        )
        self.shared_down = None if shared is None else _frozen(shared.down_proj.weight)

    def to_fp8(self) -> None:
        """The experts' weights in e4m3 with a scale per row (fp8_linear's rule), half the bytes a decode reads;
        the products run at the activations' dtype (weight-only: the routed tokens are too few per expert for
        fp8 activations to pay). The router and the shared experts keep the model's dtype."""
        from engine_svc.model.fp8_linear import quantize_rows  # fp8_linear imports the decoder, which imports this

        for name in ("gate_up", "down"):
            weight = getattr(self, name)
            quantized, scale = quantize_rows(weight.reshape(-1, weight.shape[-1]))
            setattr(self, name, _frozen(quantized.view(weight.shape)))
            setattr(self, f"{name}_scale", scale.view(weight.shape[:2]))

    def to_mxfp4(self) -> None:
        """The experts' weights in MXFP4 (mxfp4.py: a quarter of bf16's bytes, a group exponent a 32 values), as
        gpt-oss's checkpoints ship them: quantizing a checkpoint's experts that transformers dequantized at load
        gives back its own values. The products run at the activations' dtype (weight-only, as vLLM on Hopper).
        Experts loaded packed (mxfp4_load.py) stay as they are."""
        if mxfp4.is_mxfp4(self.gate_up):
            return
        for name in ("gate_up", "down"):
            packed, scales = zip(*map(mxfp4.quantize, getattr(self, name)))  # an expert at a time: float32 copies
            setattr(self, name, _frozen(torch.stack(packed)))
            setattr(self, f"{name}_scale", torch.stack(scales))

    @property
    def weight(self) -> torch.Tensor:
        return self.router

    def forward(self, x: torch.Tensor, logits: torch.Tensor | None = None) -> torch.Tensor:
        """The experts' output for the normed rows x; `logits`: the router's, where the caller computed them."""
        weights, ids = route(x, self.router, self.routing, self.router_bias, self.correction, logits)
        run = grouped_experts
        if x.is_cuda:
            from engine_svc.model.triton_moe import fused_experts as run
        out = run(
            x, self.gate_up, self.down, weights, ids, self.gating, self.gate_up_bias, self.down_bias,
            self.gate_up_scale, self.down_scale,
        )  # fmt: skip
        if self.shared_gate_up is not None and self.shared_down is not None:
            out = out + F.linear(Gating()(F.linear(x, self.shared_gate_up)), self.shared_down)
        return out
