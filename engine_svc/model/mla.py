"""Multi-head latent attention (DeepSeek V2 / V3, Kimi K2, Moonlight) on the paged cache of every other family.

MLA projects each token to a small latent (kv_lora_rank wide, RMS-normed) and one shared RoPE key head
(qk_rope_head_dim); kv_b_proj expands the latent to every head's unrotated key (qk_nope_head_dim) and value
(v_head_dim); the queries come through a low-rank pair (q_a_proj, q_a_layernorm, q_b_proj) or one q_proj. Here the
expansion happens before the cache: it holds per-head K and V, `width` wide, not the latent. So the backends (SDPA,
the Triton kernels), the K/V store and RoPE run unchanged, at a cost in cache memory (Moonlight's 16 heads: 16 KB a
token a layer against the latent's 1.1 KB); a latent cache needs an attention kernel of its own (absorbing kv_b_proj
into the query and the output), not written yet.

`width`: qk_nope + qk_rope rounded up to a power of two (the Triton kernels' head width; 192 -> 256): the pad dims
are zero in q and k (no dot product changes) and in v (the output's pad dims are dropped before o_proj). Each q and k
head is laid out as [rope | nope | zeros] and then reordered by rope.rotary_order, which puts the rope dims where
the whole-head half-rotation kernels rotate them. Interleaved RoPE (config.rope_interleave: pairs (2i, 2i + 1), as
DeepSeek's checkpoints ship) is de-interleaved at load, in q's and kv_a's rope rows: transformers rotates the same
pairs and emits them in that order, so the dot products match.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from engine_svc.model.rope import head_rows, rotary_order


def is_mla(config) -> bool:
    return getattr(config, "kv_lora_rank", None) is not None


def mla_width(config) -> int:
    """A cached K or V head's width: qk_nope + qk_rope (and v_head_dim) up to the next power of two."""
    widest = max(config.qk_nope_head_dim + config.qk_rope_head_dim, config.v_head_dim)
    return 1 << (widest - 1).bit_length()


def mla_scale(config) -> float:
    """The scores' scale: qk_head_dim ** -0.5, times mscale(factor, mscale_all_dim) ** 2 under YaRN, as transformers'
    DeepseekV3Attention (yarn_apply_mscale)."""
    scale = (config.qk_nope_head_dim + config.qk_rope_head_dim) ** -0.5
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    all_dim, factor = rope.get("mscale_all_dim", 0), rope.get("factor", 1.0)
    if rope.get("rope_type", rope.get("type", "default")) != "default" and all_dim and factor > 1:
        scale *= (0.1 * all_dim * math.log(factor) + 1.0) ** 2
    return scale


def _rope_rows(rope: int, interleaved: bool) -> torch.Tensor:
    """The rope dims in half-rotation order: (0, 2, 4, ..., 1, 3, ...) where the checkpoint interleaves them."""
    dims = torch.arange(rope)
    return torch.cat((dims[0::2], dims[1::2])) if interleaved else dims


def _stacked(*parts: tuple[nn.Linear, torch.Tensor]) -> nn.Linear:
    """One linear of each (linear, its rows) stacked; a bias where any has one (zeros for the others)."""
    weights = [linear.weight.detach()[rows.to(linear.weight.device)] for linear, rows in parts]
    out = nn.Linear(weights[0].shape[1], sum(w.shape[0] for w in weights), bias=False, device="meta")
    out.weight = nn.Parameter(torch.cat(weights), requires_grad=False)
    if any(linear.bias is not None for linear, _ in parts):
        biases = [
            w.new_zeros(w.shape[0]) if linear.bias is None else linear.bias.detach()[rows.to(w.device)]
            for w, (linear, rows) in zip(weights, parts)
        ]
        out.bias = nn.Parameter(torch.cat(biases), requires_grad=False)
    return out


class Mla(nn.Module):
    """One layer's MLA between the input norm's projection and the attention. `first`: what the decoder's normed
    projection runs, [q_a_proj or q_proj; kv_a_proj_with_mqa] fused, their rope rows reordered; `forward` turns its
    output into the fused qkv rows [tokens, 3 * heads * width] that the backends' store rotates and caches."""

    order: torch.Tensor  # [width]: a q or k head's [rope | nope | zeros] dims in the kernels' layout, registered below

    def __init__(self, attn, config, width: int, normed):
        """`normed(norm module, linear)`: the decoder's NormedProjection of them (this module cannot import it)."""
        super().__init__()
        heads, nope, rope = config.num_attention_heads, config.qk_nope_head_dim, config.qk_rope_head_dim
        self.heads, self.nope, self.rope, self.width = heads, nope, rope, width
        self.latent, self.v_dim = config.kv_lora_rank, config.v_head_dim
        rope_rows = _rope_rows(rope, bool(getattr(config, "rope_interleave", False)))
        # Each q head [nope | rope] as [rope (half-rotation order) | nope].
        q_order = torch.cat((nope + rope_rows, torch.arange(nope)))
        lora = attn.q_a_proj is not None
        q_in = attn.q_a_proj if lora else head_rows(attn.q_proj, q_order)
        self.q_in = q_in.out_features
        kv_rows = torch.cat((torch.arange(self.latent), self.latent + rope_rows))
        self.first = _stacked((q_in, torch.arange(self.q_in)), (attn.kv_a_proj_with_mqa, kv_rows))
        self.q_b = normed(attn.q_a_layernorm, head_rows(attn.q_b_proj, q_order)) if lora else None
        self.kv_b = normed(attn.kv_a_layernorm, attn.kv_b_proj)
        self.register_buffer("order", _order(width, rope).to(self.first.weight.device), persistent=False)

    def forward(self, first: torch.Tensor, ops) -> torch.Tensor:
        tokens, heads = first.shape[0], self.heads
        q, latent, k_rope = first.split((self.q_in, self.latent, self.rope), dim=-1)
        if self.q_b is not None:
            q = self.q_b(q, None, ops)[0]
        kv = self.kv_b(latent, None, ops)[0]
        k_nope, v = kv.view(tokens, heads, -1).split((self.nope, self.v_dim), dim=-1)
        k = torch.cat((k_rope[:, None].expand(-1, heads, -1), k_nope), dim=-1)  # the one rope head, every head's
        qk = F.pad(torch.cat((q.view(tokens, heads, -1), k), dim=1), (0, self.width - self.nope - self.rope))
        v = F.pad(v, (0, self.width - self.v_dim))
        return torch.cat((qk.index_select(-1, self.order), v), dim=1).view(tokens, -1)

    def convert(self, convert) -> None:
        """Each normed projection (q_b's, kv_b's) as convert(projection): skinny kernels, fp8."""
        self.q_b = None if self.q_b is None else convert(self.q_b)
        self.kv_b = convert(self.kv_b)

    def output(self, attn: torch.Tensor) -> torch.Tensor:
        """The attention's output rows [tokens, heads * v_head_dim] for o_proj (the pad dims dropped)."""
        return attn[..., : self.v_dim].reshape(attn.shape[0], self.heads * self.v_dim)


def _order(width: int, rope: int) -> torch.Tensor:
    order = rotary_order(width, rope)
    return torch.arange(width) if order is None else order
