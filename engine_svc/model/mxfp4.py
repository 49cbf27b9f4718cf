"""MXFP4 expert weights (OCP microscaling, as gpt-oss ships its experts): each weight row's values in groups of 32
along the inner dimension, each value a 4-bit e2m1 float (sign, 2 exponent bits, 1 mantissa bit: 0, 0.5, 1, 1.5,
2, 3, 4, 6), each group scaled by 2^(s - 127) for its uint8 e8m0 exponent s.

Layout, as the checkpoint's `*_blocks` / `*_scales` tensors flattened over their blocks (transformers'
integrations/mxfp4.py): weights [..., out, in // 2] uint8, two values a byte, the even inner index in the low
nibble; scales [..., out, in // 32] uint8. The grouped GEMM (triton_moe.py) reads them in that layout.

`quantize` picks each group's smallest scale that holds its largest magnitude (s = ceil(log2(amax / 6)) + 127)
and rounds to the nearest e2m1 value. A tensor already on the MXFP4 grid (a checkpoint's experts that transformers
dequantized at load) comes back exactly: with that scale every value of the group is on the grid again, so the
engine serves an MXFP4 checkpoint's own values.
"""

from __future__ import annotations

import torch

GROUP = 32
VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # the e2m1 magnitudes, by their 3 low bits
_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed [..., in // 2] uint8, scales [..., in // 32] uint8) of `weight` [..., in], in a multiple of 32."""
    groups = weight.float().contiguous().unflatten(-1, (-1, GROUP))
    amax = groups.abs().amax(dim=-1)
    mantissa, exponent = torch.frexp(amax / VALUES[-1])  # amax / 6 = mantissa * 2^exponent, mantissa in [0.5, 1)
    shift = torch.where(mantissa == 0.5, exponent - 1, exponent)  # ceil(log2(amax / 6)), exact at powers of two
    shift = torch.where(amax > 0, shift, -127).clamp(-127, 127)
    scaled = groups / torch.exp2(shift.float())[..., None]
    boundaries = torch.tensor(_MIDPOINTS, device=weight.device)
    codes = torch.bucketize(scaled.abs(), boundaries).to(torch.uint8) | ((scaled < 0).to(torch.uint8) << 3)
    codes = codes.flatten(-2)
    return codes[..., 0::2] | (codes[..., 1::2] << 4), (shift + 127).to(torch.uint8)


def dequantize(packed: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The values [..., in] of MXFP4 `packed` [..., in // 2] and `scales` [..., in // 32], in `dtype`."""
    table = torch.tensor(VALUES + tuple(-v for v in VALUES), dtype=torch.float32, device=packed.device)
    codes = torch.stack((packed & 0xF, packed >> 4), dim=-1).flatten(-2).long()
    values = table[codes].unflatten(-1, (-1, GROUP))
    return torch.ldexp(values, scales.int()[..., None] - 127).flatten(-2).to(dtype)


def is_mxfp4(weight: torch.Tensor) -> bool:
    """Whether an expert weight is packed MXFP4 (uint8: e4m3 experts are float8, others the model's dtype)."""
    return weight.dtype == torch.uint8


def checkpoint_quantization(config) -> str:
    """The quantization a checkpoint's config.json declares ("mxfp4" for gpt-oss's published weights), else ""."""
    declared = getattr(config, "quantization_config", None) or {}
    method = declared.get("quant_method", "") if isinstance(declared, dict) else getattr(declared, "quant_method", "")
    return str(getattr(method, "value", method) or "")


def mxfp4_problem(config) -> str | None:
    """Why MXFP4 experts cannot serve this model, or None when they can: a gpt-oss (the family whose checkpoints
    ship them; the kernels' groups run along each expert's hidden and inner widths, multiples of 32)."""
    if config.model_type != "gpt_oss":
        return f"MXFP4 experts are gpt-oss's; this model is {config.model_type}"
    odd = [f"{name} {size}" for name in ("hidden_size", "intermediate_size") if (size := getattr(config, name)) % 32]
    if odd:
        return f"MXFP4 groups of 32 need widths that are multiples of 32; this model has {', '.join(odd)}"
    return None
