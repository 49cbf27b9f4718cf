"""RoPE for the fused decoder: the cos/sin tables of transformers' rotary module, and partial rotary (a head's
first dims rotate, the rest pass: GLM-4.5) brought to the whole-head half-rotation layout that the RoPE kernels
(fused_ops.rope_split, triton_attention.rope_store) rotate, by reordering each q and k head's dims at load."""

from __future__ import annotations

import torch
from torch import nn


def inv_freq(rotary, kind: str) -> torch.Tensor:
    return getattr(rotary, f"{kind}_inv_freq" if kind else "inv_freq")


def rope_table(rotary, kind: str, max_model_len: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [max_model_len, width (head_dim)] (float32, half-rotation layout) of the transformers rotary
    module's table `kind` (Gemma 3: one per layer type, "" the module's only one), its attention scaling applied.
    Where the module rotates fewer dims than a head has (partial rotary), the rest of each half has cos 1 and sin 0:
    those dims pass unrotated (`rotary_order` puts the passing dims there)."""
    frequencies = inv_freq(rotary, kind)
    scaling = getattr(rotary, f"{kind}_attention_scaling" if kind else "attention_scaling")
    positions = torch.arange(max_model_len, dtype=torch.float32, device=frequencies.device)
    freqs = positions[:, None] * frequencies.float()[None, :]
    passing = width // 2 - freqs.shape[1]
    cos = nn.functional.pad(freqs.cos() * scaling, (0, passing), value=1.0)
    sin = nn.functional.pad(freqs.sin() * scaling, (0, passing))
    return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)


def rotary_order(width: int, rotary_dim: int) -> torch.Tensor | None:
    """Partial rotary (GLM-4.5: a head's first rotary_dim dims rotate, in half-rotation layout over those dims; the
    rest pass): an order of a head's dims that puts each rotated pair (i, i + rotary_dim / 2) at (i, i + width / 2),
    the pairs the whole-head RoPE kernels rotate, and the passing dims where the table leaves them. q and k heads
    are both reordered (their projections' rows, their norms' weights), so their dot products, the attention, are
    unchanged, and no kernel learns of it. None: the whole head rotates."""
    if rotary_dim >= width:
        return None
    half, passing = rotary_dim // 2, (width - rotary_dim) // 2
    spans = ((0, half), (rotary_dim, rotary_dim + passing), (half, rotary_dim), (rotary_dim + passing, width))
    return torch.cat([torch.arange(start, end) for start, end in spans])


def head_rows(linear: nn.Linear, order: torch.Tensor | None) -> nn.Linear:
    """`linear` with each head's output rows in `order` (None: as it is)."""
    if order is None:
        return linear
    width = order.numel()
    heads = linear.weight.shape[0] // width
    rows = (torch.arange(heads)[:, None] * width + order).flatten().to(linear.weight.device)
    out = nn.Linear(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
    out.weight = nn.Parameter(linear.weight.detach()[rows], requires_grad=False)
    if linear.bias is not None:
        out.bias = nn.Parameter(linear.bias.detach()[rows], requires_grad=False)
    return out
