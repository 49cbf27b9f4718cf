"""The Triton fp8 row quantization (of a tensor, and of the SwiGLU) against fp8_linear.quantize_rows. CUDA only:
`python -m pytest tests/engine/test_triton_fp8.py` on the GPU machine."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine_svc.model.fp8_linear import FP8, quantize_rows

if not torch.cuda.is_available():
    pytest.skip("the Triton kernels need CUDA", allow_module_level=True)
triton_fp8 = pytest.importorskip("engine_svc.model.triton_fp8")


def assert_same_quantization(got: tuple[torch.Tensor, torch.Tensor], want: tuple[torch.Tensor, torch.Tensor]):
    (q, scale), (want_q, want_scale) = got, want
    assert q.dtype == FP8 and q.shape == want_q.shape and scale.shape == want_scale.shape
    torch.testing.assert_close(scale, want_scale, rtol=1e-5, atol=0)
    # The values agree to float32 rounding (the kernel's exp is not torch's), so the e4m3 codes are the same
    # but where a value sits on a rounding boundary: there, one e4m3 step apart (1/8 of the value, or one
    # subnormal step), and rarely.
    a, b = q.float(), want_q.float()
    apart = a != b
    if q.numel():
        assert apart.float().mean().item() < 1e-4
    assert torch.all((a - b).abs()[apart] <= torch.maximum(a.abs(), b.abs())[apart] / 8 + 2**-9)


def rows(tokens: int, width: int) -> torch.Tensor:
    torch.manual_seed(0)
    x = torch.randn(tokens, width, device="cuda", dtype=torch.bfloat16) * 4
    if tokens:
        x[0] = 0  # an all-zero row stays zero, with a positive scale
    if tokens > 1:
        x[1, 3] = 1e4  # one outlier scales only its own row
    return x


@pytest.mark.parametrize("tokens", [0, 1, 7, 300])
@pytest.mark.parametrize("width", [4096, 1000, 40000])  # one pass in registers, and two over a row too wide
def test_rows_quantize_as_quantize_rows(tokens, width):
    x = rows(tokens, width)
    assert_same_quantization(triton_fp8.quantize_rows(x), quantize_rows(x))


@pytest.mark.parametrize("tokens", [0, 1, 7, 300])
@pytest.mark.parametrize("width", [14336, 1000, 40000])
def test_the_swiglu_quantizes_as_quantize_rows_of_the_product(tokens, width):
    gate_up = rows(tokens, 2 * width)
    gate, up = gate_up.float().chunk(2, dim=-1)
    assert_same_quantization(triton_fp8.silu_mul_quant(gate_up), quantize_rows(F.silu(gate) * up))


def test_rows_of_a_wider_buffer():
    """The input may be a row slice of a larger buffer (rows contiguous, stride wider)."""
    base = rows(5, 2 * 512 + 64)
    gate_up = base[:, : 2 * 512]
    gate, up = gate_up.float().chunk(2, dim=-1)
    assert_same_quantization(triton_fp8.silu_mul_quant(gate_up), quantize_rows(F.silu(gate) * up))
    assert_same_quantization(triton_fp8.quantize_rows(base[:, :512]), quantize_rows(base[:, :512]))
