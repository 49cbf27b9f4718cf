"""The Triton SwiGLU against torch. CUDA only: `python -m pytest tests/engine/test_triton_silu.py` on the GPU machine."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    pytest.skip("the Triton kernels need CUDA", allow_module_level=True)
triton_silu = pytest.importorskip("engine_svc.model.triton_silu")


@pytest.mark.parametrize("tokens", [0, 1, 7, 300])
@pytest.mark.parametrize("width", [8192, 14336, 1000])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_equals_silu_gate_times_up(tokens, width, dtype):
    torch.manual_seed(0)
    gate_up = torch.randn(tokens, 2 * width, device="cuda", dtype=dtype) * 4
    gate, up = gate_up.float().chunk(2, dim=-1)
    got = triton_silu.silu_mul(gate_up)
    assert got.shape == (tokens, width) and got.dtype == dtype
    torch.testing.assert_close(
        got.float(), F.silu(gate) * up, rtol=1e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-2
    )


def test_rows_of_a_wider_buffer():
    """The fused projection's output may be a row slice of a larger buffer (rows contiguous, stride wider)."""
    base = torch.randn(5, 2 * 512 + 64, device="cuda", dtype=torch.bfloat16)
    gate_up = base[:, : 2 * 512]
    gate, up = gate_up.float().chunk(2, dim=-1)
    torch.testing.assert_close(triton_silu.silu_mul(gate_up).float(), F.silu(gate) * up, rtol=1e-2, atol=1e-2)
