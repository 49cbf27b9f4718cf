"""A routed mixture of experts in place of a decoder layer's MLP (Qwen3 MoE).

Routing as transformers does it: softmax over every expert's logit (float32), the top k, renormalised to sum to
one where the config says (norm_topk_prob), cast to the model's dtype. The experts are SwiGLU MLPs stored as
3-D tensors (gate_up [experts, 2 * inner, hidden], down [experts, hidden, inner]).

On CPU the assignments are sorted by expert and each expert that got tokens runs its two matmuls over them
(a plain grouped path: the host reads the counts). On CUDA the grouped GEMMs run in one Triton kernel each
(triton_moe.py), with no host read, so CUDA graphs capture them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def route(x: torch.Tensor, router: torch.Tensor, top_k: int, renormalize: bool):
    """(weights [tokens, k] in x's dtype, expert ids [tokens, k]) of each token."""
    probs = F.softmax(F.linear(x, router), dim=-1, dtype=torch.float32)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(x.dtype), ids


def grouped_experts(x, gate_up, down, weights, ids) -> torch.Tensor:
    """sum over each token's k experts of weight * down(silu(gate) * up), one pair of matmuls per expert hit."""
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
        h = F.linear(x[rows], gate_up[expert])
        gate, up = h.chunk(2, dim=-1)
        out.index_add_(0, rows, F.linear(F.silu(gate) * up, down[expert]) * scale[start : start + count])
        start += count
    return out


class SparseMoe(nn.Module):
    """The experts of one layer, called on the normed hidden rows [tokens, hidden]."""

    def __init__(self, hf_block, config):
        super().__init__()
        experts = hf_block.experts
        self.router = nn.Parameter(hf_block.gate.weight.detach(), requires_grad=False)
        self.gate_up = nn.Parameter(experts.gate_up_proj.detach(), requires_grad=False)
        self.down = nn.Parameter(experts.down_proj.detach(), requires_grad=False)
        self.top_k = config.num_experts_per_tok
        self.renormalize = bool(getattr(config, "norm_topk_prob", False))
        self.bias = None  # a Projection without bias, for NormedProjection

    @property
    def weight(self) -> torch.Tensor:
        return self.router

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, ids = route(x, self.router, self.top_k, self.renormalize)
        if x.is_cuda:
            from engine_svc.model.triton_moe import fused_experts

            return fused_experts(x, self.gate_up, self.down, weights, ids)
        return grouped_experts(x, self.gate_up, self.down, weights, ids)
