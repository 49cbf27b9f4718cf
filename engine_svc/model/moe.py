"""A routed mixture of experts in place of a decoder layer's MLP (Qwen3 MoE, gpt-oss).

Routing as transformers does it. Qwen3: softmax over every expert's logit (float32), the top k, renormalised to
sum to one where the config says (norm_topk_prob), cast to the model's dtype. gpt-oss: the top k of the biased
logits, softmax over those k. The experts are gated MLPs stored as 3-D tensors (gate_up [experts, 2 * inner,
hidden] as [gate; up], down [experts, hidden, inner]; gpt-oss's transposed, interleaved, biased weights are
brought to that layout at load), SwiGLU or gpt-oss's clamped variant: (up + 1) * gate * sigmoid(alpha * gate).

On CPU the assignments are sorted by expert and each expert that got tokens runs its two matmuls over them
(a plain grouped path: the host reads the counts). On CUDA the grouped GEMMs run in one Triton kernel each
(triton_moe.py), with no host read, so CUDA graphs capture them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


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


def route(x: torch.Tensor, router: torch.Tensor, top_k: int, renormalize: bool, bias=None, softmax_top_k=False):
    """(weights [tokens, k] in x's dtype, expert ids [tokens, k]) of each token."""
    logits = F.linear(x, router, bias)
    if softmax_top_k:  # gpt-oss: softmax over the k chosen logits
        values, ids = torch.topk(logits, top_k, dim=-1)
        return F.softmax(values, dim=-1, dtype=values.dtype), ids
    weights, ids = torch.topk(F.softmax(logits, dim=-1, dtype=torch.float32), top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(x.dtype), ids


def grouped_experts(x, gate_up, down, weights, ids, gating=Gating(), gate_up_bias=None, down_bias=None):
    """sum over each token's k experts of weight * down(gating(gate_up(x))), one pair of matmuls per expert hit."""
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
        h = F.linear(x[rows], gate_up[expert], None if gate_up_bias is None else gate_up_bias[expert])
        y = F.linear(gating(h), down[expert], None if down_bias is None else down_bias[expert])
        out.index_add_(0, rows, y * scale[start : start + count])
        start += count
    return out


def _frozen(t: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t.detach().contiguous(), requires_grad=False)


class SparseMoe(nn.Module):
    """The experts of one layer, called on the normed hidden rows [tokens, hidden]."""

    def __init__(self, hf_block, config):
        super().__init__()
        experts = hf_block.experts
        self.top_k = config.num_experts_per_tok
        self.renormalize = bool(getattr(config, "norm_topk_prob", False))
        self.bias = None  # a Projection without bias, for NormedProjection
        if hasattr(hf_block, "router"):  # gpt-oss: [experts, hidden, 2 * inner], gate and up interleaved
            gate_up, gate_up_bias = experts.gate_up_proj.transpose(1, 2), experts.gate_up_proj_bias
            self.router, self.router_bias = _frozen(hf_block.router.weight), _frozen(hf_block.router.bias)
            self.gate_up = _frozen(torch.cat((gate_up[:, 0::2], gate_up[:, 1::2]), dim=1))
            self.gate_up_bias = _frozen(torch.cat((gate_up_bias[:, 0::2], gate_up_bias[:, 1::2]), dim=1))
            self.down, self.down_bias = _frozen(experts.down_proj.transpose(1, 2)), _frozen(experts.down_proj_bias)
            self.gating, self.softmax_top_k = Gating(experts.alpha, experts.limit), True
        else:
            self.router, self.router_bias = _frozen(hf_block.gate.weight), None
            self.gate_up, self.gate_up_bias = _frozen(experts.gate_up_proj), None
            self.down, self.down_bias = _frozen(experts.down_proj), None
            self.gating, self.softmax_top_k = Gating(), False

    @property
    def weight(self) -> torch.Tensor:
        return self.router

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, ids = route(x, self.router, self.top_k, self.renormalize, self.router_bias, self.softmax_top_k)
        run = grouped_experts
        if x.is_cuda:
            from engine_svc.model.triton_moe import fused_experts as run
        return run(x, self.gate_up, self.down, weights, ids, self.gating, self.gate_up_bias, self.down_bias)
