"""FP8 (e4m3) projections: weights quantized once at load, activations per token at run time.

The scheme is the dynamic one of vLLM's `--quantization fp8` with finer scales: each weight row (output
feature) and each activation row (token) gets its own scale, max |value| / 448, so one outlier scales only
its own row. `torch._scaled_mm` multiplies the e4m3 operands on the tensor cores (Hopper and Ada run them at
twice the bf16 rate, reading half the weight bytes) and applies both scales on the way out, in the model's
dtype. The vocabulary head, norms, attention and the KV cache stay in the model's dtype. On CPU the same
numbers come from float32 matmuls over the e4m3 values (parity and tests; no speed to gain there).

On Hopper, a product whose 128 x 128 output tiles would fill at most half the SMs (an 8B model's o_proj and down
at 256 rows: 64 tiles for the H200's 132 SMs) runs in a Triton kernel with a program per tile and half of the
inner dimension (triton_fp8_mm.py, which gives the H200's figures). The halves leave as PartialSums, added by
the residual add + RMSNorm kernel after them (where nothing follows, `whole` adds them).

Products of FAST_ACCUM_ROWS rows or more (and not split) let the tensor cores accumulate in their own precision
instead of promoting partial sums to float32 along the inner dimension (cuBLAS's fast accumulation, what torchao's
fp8 inference and forward passes use): the same error against bf16 (3.7%, dominated by the e4m3 rounding), and
on the H200 gate_up at 256 rows 64.9 -> 57.4 us; at one row it is slower.
"""

from __future__ import annotations

import torch
from torch import nn

from engine_svc.model.decoder import NormedProjection, PartialSums, head_dim, whole
from engine_svc.model.mla import is_mla

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max
MIN_SCALE = 1e-12  # an all-zero row stays zero instead of dividing by zero
TILE = 128  # the output tiles' rows and columns in cuBLAS's fp8 kernels at decode sizes
FAST_ACCUM_ROWS = 128


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x / scale as e4m3, scale [rows, 1] float32) with each row's largest magnitude mapped to FP8_MAX."""
    scale = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=MIN_SCALE) / FP8_MAX
    return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


class Fp8Linear(nn.Module):
    """A bias-optional linear layer over an e4m3 weight with per-output-feature scales. It takes activations in
    the model's dtype (and quantizes them itself) or already quantized, as (e4m3 rows, scales)."""

    scale: torch.Tensor  # [1, out] float32, registered below

    def __init__(self, linear: nn.Linear, quantize, fast_accum_rows: int = FAST_ACCUM_ROWS):
        """`quantize`: quantize_rows, or a kernel that computes it (FusedOps.quantize_rows, triton_fp8.py).
        `fast_accum_rows`: unsplit CUDA products of this many rows or more accumulate in the tensor cores' own
        precision."""
        super().__init__()
        weight, scale = quantize_rows(linear.weight.detach())
        self.weight = nn.Parameter(weight, requires_grad=False)  # [out, in], read transposed (column-major)
        self.register_buffer("scale", scale.t().contiguous(), persistent=False)  # [1, out]
        self.bias = linear.bias
        self.out_dtype = linear.weight.dtype
        self.quantize = quantize
        self.fast_accum_rows = fast_accum_rows
        self.sms = 0  # the SMs a split product fills: none where it does not run (CPU, before Hopper's TMA)
        if weight.is_cuda and torch.cuda.get_device_capability(weight.device) >= (9, 0):
            from engine_svc.model.triton_fp8_mm import INNER_MULTIPLE, split_fp8_mm  # CUDA builds of torch bring Triton

            self.sms = torch.cuda.get_device_properties(weight.device).multi_processor_count
            self.split_mm, self.inner_multiple = split_fp8_mm, INNER_MULTIPLE

    def forward(self, x: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor | PartialSums:
        """The product; split (`splits_inner`) and bias-free, its two halves as PartialSums."""
        q, scale = x if isinstance(x, tuple) else self.quantize(x)
        if not q.is_cuda:  # the same products in float32 (CPU fp8 matmuls take per-row scales only from torch 2.13 on)
            out = ((q.float() @ self.weight.float().t()) * scale * self.scale).to(self.out_dtype)
        elif self.splits_inner(q.shape[0]):
            out = PartialSums(self.split_mm(q, self.weight, scale, self.scale, self.out_dtype))
        else:
            out = self._mm(q, self.weight, scale, fast=q.shape[0] >= self.fast_accum_rows)
        return out if self.bias is None else whole(out) + self.bias

    def splits_inner(self, rows: int) -> bool:
        """Whether `rows` rows take the inner dimension in two halves (triton_fp8_mm.py): when the product's output
        tiles fill at most half the GPU's SMs (o_proj and down of an 8B model at 256 rows: 64 tiles, 132 SMs),
        and each half is a whole number of the kernel's inner tiles."""
        out_features, in_features = self.weight.shape
        tiles = -(-rows // TILE) * -(-out_features // TILE)
        return 2 * tiles <= self.sms and in_features % self.inner_multiple == 0

    def _mm(self, q, weight, scale, fast: bool = False) -> torch.Tensor:
        return torch._scaled_mm(  # pyright: ignore[reportPrivateImportUsage] (public in all but name since 2.1)
            q, weight.t(), scale_a=scale, scale_b=self.scale, out_dtype=self.out_dtype, use_fast_accum=fast
        )


class Fp8NormedProjection(NormedProjection):
    """A NormedProjection over an Fp8Linear, the activations' quantization fused into the norm before it (and,
    gated, into the SwiGLU after it: its output goes to the down projection quantized)."""

    linear: Fp8Linear

    def forward(self, x: torch.Tensor | PartialSums, residual: torch.Tensor | None, ops):
        if residual is None:
            residual = whole(x)  # the first layer's input: the embeddings, one tensor
            quantized = ops.rms_norm_quant(residual, self.norm.weight, self.norm.eps)
        elif isinstance(x, PartialSums):
            *quantized, residual = ops.add_rms_norm_quant(x[0], residual, self.norm.weight, self.norm.eps, x[1])
        else:
            *quantized, residual = ops.add_rms_norm_quant(x, residual, self.norm.weight, self.norm.eps)
        out = whole(self.linear(tuple(quantized)))  # what follows (rope and the K/V store, SwiGLU) takes one tensor
        return (ops.silu_mul_quant(out) if self.gated else out), residual


def fp8_device_problem(device: torch.device) -> str | None:
    """Why e4m3 cannot run on `device` (a CUDA GPU before compute capability 8.9), or None: CPUs convert in torch."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 9):
        return f"need compute capability 8.9 or later (Ada, Hopper); {torch.cuda.get_device_name(device)} has less"
    return None


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
    if is_mla(config):  # mla.py's projections: [q_a_proj or q_proj; kv_a_proj_with_mqa], q_b_proj, kv_b_proj
        nope, rope, heads = config.qk_nope_head_dim, config.qk_rope_head_dim, config.num_attention_heads
        q_in = config.q_lora_rank or heads * (nope + rope)
        sizes["MLA input width"] = q_in + config.kv_lora_rank + rope
        sizes["q_lora_rank"] = config.q_lora_rank or 16
        sizes["kv_lora_rank"] = config.kv_lora_rank
        sizes["kv_b_proj width"] = heads * (nope + config.v_head_dim)
    if odd := [f"{name} {size}" for name, size in sizes.items() if size % 16]:
        return f"fp8 matmuls need sizes that are multiples of 16; this model has {', '.join(odd)}"
    if reason := fp8_device_problem(device):
        return f"fp8 matmuls {reason}"
    if device.type == "cuda" and dtype != torch.bfloat16:
        return f"on CUDA the model must be bfloat16 (--dtype bfloat16), not {str(dtype).removeprefix('torch.')}"
    return None
