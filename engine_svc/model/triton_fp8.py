"""Per-row fp8 quantization of activations in one Triton kernel: of a tensor, or of the SwiGLU of [gate; up].

Both compute fp8_linear.quantize_rows (each row scaled so its largest magnitude maps to the e4m3 maximum).
Inductor compiles that into a reduction kernel for the row's max and a second pass for the division, and for the
SwiGLU into three kernels (the max, the product again, the division), each re-reading the rows at 1-1.6 TB/s:
on the H200, 22% of a Llama-8B shape's 8,128-token fp8 step and 1 of its 7.8 ms decode step (256 rows) went to
the SwiGLU's. Here one program holds its row in registers (up to MAX_ONE_PASS columns; a wider row takes a second
pass, from L2): one read of the input, one byte written per value, and the scale.
"""
# pyright: reportArgumentType=false, reportCallIssue=false, reportOperatorIssue=false, reportIndexIssue=false
# (Triton's stubs type kernel parameters as tl.constexpr and tensors' indexing narrowly; kernels pass plain values.)

from __future__ import annotations

import torch
import triton  # pyright: ignore[reportMissingImports]
import triton.language as tl  # pyright: ignore[reportMissingImports]

from engine_svc.model.fp8_linear import FP8, FP8_MAX, MIN_SCALE
from engine_svc.model.triton_silu import swiglu

MAX_ONE_PASS = 16384  # the widest row a program keeps in registers (Llama-8B's 14,336-wide SwiGLU fits)


@triton.jit
def _values(in_ptr, cols, width, SILU: tl.constexpr):
    """The row's values at `cols` (float32; 0 past `width`): the input itself, or silu(gate) * up."""
    if SILU:
        return swiglu(in_ptr, cols, width)
    return tl.load(in_ptr + cols, mask=cols < width, other=0.0).to(tl.float32)


@triton.jit
def _quantize(
    in_ptr, out_ptr, scale_ptr, width, stride_in, stride_out, fp8_max, min_scale,
    BLOCK: tl.constexpr, ONE_PASS: tl.constexpr, SILU: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    in_ptr += row * stride_in
    out_ptr += row * stride_out
    cols = tl.arange(0, BLOCK)
    if ONE_PASS:  # the whole row in registers: one read
        x = _values(in_ptr, cols, width, SILU)
        scale = tl.maximum(tl.max(tl.abs(x), axis=0), min_scale) / fp8_max
        out = tl.clamp(x / scale, -fp8_max, fp8_max).to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + cols, out, mask=cols < width)
    else:
        amax = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, width, BLOCK):
            amax = tl.maximum(amax, tl.abs(_values(in_ptr, start + cols, width, SILU)))
        scale = tl.maximum(tl.max(amax, axis=0), min_scale) / fp8_max
        for start in range(0, width, BLOCK):
            x = _values(in_ptr, start + cols, width, SILU)
            out = tl.clamp(x / scale, -fp8_max, fp8_max).to(out_ptr.dtype.element_ty)
            tl.store(out_ptr + start + cols, out, mask=start + cols < width)
    tl.store(scale_ptr + row, scale)


def _launch(x: torch.Tensor, width: int, silu: bool) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = x.shape[0]
    assert x.stride(1) == 1
    out = torch.empty(tokens, width, dtype=FP8, device=x.device)
    scale = torch.empty(tokens, 1, dtype=torch.float32, device=x.device)
    if tokens:
        block = min(triton.next_power_of_2(width), MAX_ONE_PASS)
        _quantize[(tokens,)](  # pyright: ignore[reportIndexIssue]
            x, out, scale, width, x.stride(0), out.stride(0), FP8_MAX, MIN_SCALE,
            BLOCK=block, ONE_PASS=block >= width, SILU=silu, num_warps=min(max(block // 512, 4), 16),
        )  # fmt: skip
    return out, scale


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [tokens, width] (rows contiguous) -> (e4m3 [tokens, width], scales [tokens, 1] float32)."""
    return _launch(x, x.shape[1], silu=False)


def silu_mul_quant(gate_up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """gate_up [tokens, 2 * width] (rows contiguous) -> quantize_rows(silu(gate) * up)."""
    return _launch(gate_up, gate_up.shape[1] // 2, silu=True)
