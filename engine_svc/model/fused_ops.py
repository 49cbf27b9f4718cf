"""Elementwise chains of a decoder layer as single functions, compiled into fused kernels on CUDA.

Each is a pure function (no mutation), so torch.compile turns it into one or two Triton kernels that the
runner's CUDA graphs then replay; on CPU they run eagerly. Fewer kernels per layer is what makes small
decode batches fast.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine_svc.model.fp8_linear import quantize_rows


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    """(rms_norm(x + residual), x + residual)."""
    total = x + residual
    return F.rms_norm(total, (total.shape[-1],), weight, eps), total


def rope_split(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, num_heads: int, num_kv_heads: int):
    """Split fused qkv rows and rotate q and k (half-rotation layout): q [T, H, D] and kv [T, 2, KVH, D]."""
    tokens = qkv.shape[0]
    head_dim = cos.shape[-1]
    heads = qkv.view(tokens, num_heads + 2 * num_kv_heads, head_dim)
    qk, v = heads[:, : num_heads + num_kv_heads], heads[:, num_heads + num_kv_heads :]
    half = head_dim // 2
    rotated = torch.cat((-qk[..., half:], qk[..., :half]), dim=-1)
    qk = qk * cos + rotated * sin
    q = qk[:, :num_heads]
    kv = torch.stack((qk[:, num_heads:], v), dim=1)
    return q.contiguous(), kv


def qk_norm(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float, num_heads: int):
    """Fused qkv rows with each q head and each k head RMS-normed over its head_dim (Qwen3, Gemma 3)."""
    tokens, head_dim = qkv.shape[0], q_weight.shape[0]
    heads = qkv.view(tokens, -1, head_dim)
    num_kv_heads = (heads.shape[1] - num_heads) // 2
    q = F.rms_norm(heads[:, :num_heads], (head_dim,), q_weight, eps)
    k = F.rms_norm(heads[:, num_heads : num_heads + num_kv_heads], (head_dim,), k_weight, eps)
    return torch.cat((q, k, heads[:, num_heads + num_kv_heads :]), dim=1).view(tokens, -1)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


def rms_norm_quant(x: torch.Tensor, weight: torch.Tensor, eps: float):
    """rms_norm(x) as fp8 rows and their scales (fp8_linear.py)."""
    return quantize_rows(rms_norm(x, weight, eps))


def add_rms_norm_quant(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, partner: torch.Tensor | None = None
):
    """(fp8 rows of rms_norm(x + residual), their scales, x + residual); `partner` (x's other half, when x came
    as PartialSums) is added to x first, in the same kernel."""
    normed, total = add_rms_norm(x if partner is None else x + partner, residual, weight, eps)
    return *quantize_rows(normed), total


def silu_mul_quant(gate_up: torch.Tensor):
    """silu(gate) * up as fp8 rows and their scales."""
    return quantize_rows(silu_mul(gate_up))


class FusedOps:
    """The functions above, compiled (dynamic shapes: one compile serves every batch size) or eager."""

    def __init__(self, compile_kernels: bool):
        wrap = (lambda fn: torch.compile(fn, dynamic=True)) if compile_kernels else (lambda fn: fn)
        self.rms_norm = wrap(rms_norm)
        self.add_rms_norm = wrap(add_rms_norm)
        self.rope_split = wrap(rope_split)
        self.qk_norm = wrap(qk_norm)
        self.silu_mul = wrap(silu_mul)
        self.quantize_rows = wrap(quantize_rows)
        self.rms_norm_quant = wrap(rms_norm_quant)
        self.add_rms_norm_quant = wrap(add_rms_norm_quant)
        self.silu_mul_quant = wrap(silu_mul_quant)
