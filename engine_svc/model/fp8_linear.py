"""FP8 (e4m3) projections: weights quantized once at load, activations per token at run time.

The scheme is the dynamic one of vLLM's `--quantization fp8` with finer scales: each weight row (output
feature) and each activation row (token) gets its own scale, max |value| / 448, so one outlier scales only
its own row. `torch._scaled_mm` multiplies the e4m3 operands on the tensor cores (Hopper and Ada run them at
twice the bf16 rate, reading half the weight bytes) and applies both scales on the way out, in the model's
dtype. The vocabulary head, norms, attention and the KV cache stay in the model's dtype. On CPU the same
numbers come from float32 matmuls over the e4m3 values (parity and tests; no speed to gain there).
"""

from __future__ import annotations

import torch
from torch import nn

from engine_svc.model.decoder import NormedProjection, head_dim

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max
MIN_SCALE = 1e-12  # an all-zero row stays zero instead of dividing by zero


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x / scale as e4m3, scale [rows, 1] float32) with each row's largest magnitude mapped to FP8_MAX."""
    scale = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=MIN_SCALE) / FP8_MAX
    return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


class Fp8Linear(nn.Module):
    """A bias-optional linear layer over an e4m3 weight with per-output-feature scales. It takes activations in
    the model's dtype (and quantizes them itself) or already quantized, as (e4m3 rows, scales)."""

    scale: torch.Tensor  # [1, out] float32, registered below

    def __init__(self, linear: nn.Linear, quantize):
        """`quantize`: quantize_rows, or a compiled version of it (FusedOps.quantize_rows: one kernel on CUDA)."""
        super().__init__()
        weight, scale = quantize_rows(linear.weight.detach())
        self.weight = nn.Parameter(weight, requires_grad=False)  # [out, in], read transposed (column-major)
        self.register_buffer("scale", scale.t().contiguous(), persistent=False)  # [1, out]
        self.bias = linear.bias
        self.out_dtype = linear.weight.dtype
        self.quantize = quantize

    def forward(self, x: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        q, scale = x if isinstance(x, tuple) else self.quantize(x)
        if q.is_cuda:
            out = torch._scaled_mm(  # pyright: ignore[reportPrivateImportUsage] (public in all but name since 2.1)
                q, self.weight.t(), scale_a=scale, scale_b=self.scale, out_dtype=self.out_dtype
            )
        else:  # the same products in float32 (CPU fp8 matmuls take per-row scales only from torch 2.13 on)
            out = ((q.float() @ self.weight.float().t()) * scale * self.scale).to(self.out_dtype)
        return out if self.bias is None else out + self.bias


class Fp8NormedProjection(NormedProjection):
    """A NormedProjection over an Fp8Linear, the activations' quantization fused into the norm before it (and,
    gated, into the SwiGLU after it: its output goes to the down projection quantized)."""

    linear: Fp8Linear

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None, ops):
        if residual is None:
            quantized, residual = ops.rms_norm_quant(x, self.norm.weight, self.norm.eps), x
        else:
            *quantized, residual = ops.add_rms_norm_quant(x, residual, self.norm.weight, self.norm.eps)
        out = self.linear(tuple(quantized))
        return (ops.silu_mul_quant(out) if self.gated else out), residual


def fp8_problem(config, device: torch.device, dtype: torch.dtype) -> str | None:
    """Why fp8 projections cannot serve this model here, or None when they can: every projection's sizes must
    be multiples of 16 (cuBLAS's fp8 layouts; checked on CPU too, so what starts there starts on a GPU), and on
    CUDA the GPU needs compute capability 8.9 (Ada, Hopper) and the model bfloat16 (per-row scales come out
    only into bfloat16)."""
    width = head_dim(config)
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    sizes = {
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "query width": config.num_attention_heads * width,
        "key/value width": kv_heads * width,
    }
    if odd := [f"{name} {size}" for name, size in sizes.items() if size % 16]:
        return f"fp8 matmuls need sizes that are multiples of 16; this model has {', '.join(odd)}"
    if device.type != "cuda":
        return None
    if torch.cuda.get_device_capability(device) < (8, 9):
        return f"fp8 matmuls need compute capability 8.9 or later (Ada, Hopper); {torch.cuda.get_device_name(device)} has less"
    if dtype != torch.bfloat16:
        return f"on CUDA the model must be bfloat16 (--dtype bfloat16), not {str(dtype).removeprefix('torch.')}"
    return None
