"""The skinny Triton matmul against torch's. CUDA only: `python -m pytest tests/engine/test_triton_linear.py` on the
GPU machine."""

from __future__ import annotations

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("the Triton kernel needs CUDA", allow_module_level=True)
triton_linear = pytest.importorskip("engine_svc.triton_linear")


@pytest.mark.parametrize("rows", [1, 3, 8, 16])
@pytest.mark.parametrize("features,inputs", [(3072, 2048), (2048, 8192), (1000, 520)])
def test_equals_linear(rows, features, inputs):
    torch.manual_seed(0)
    x = torch.randn(rows, inputs, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(features, inputs, device="cuda", dtype=torch.bfloat16) / inputs**0.5
    expected = (x.float() @ weight.float().t()).to(torch.bfloat16)
    torch.testing.assert_close(triton_linear.skinny_matmul(x, weight), expected, atol=2e-2, rtol=2e-2)
