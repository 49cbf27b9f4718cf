"""The skinny Triton matmul, plain and with the norm and SwiGLU fused in, against torch's. CUDA only:
`python -m pytest tests/engine/test_triton_linear.py` on the GPU machine."""

from __future__ import annotations

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("the Triton kernel needs CUDA", allow_module_level=True)
triton_linear = pytest.importorskip("engine_svc.model.triton_linear")
from engine_svc.model import fused_ops  # noqa: E402


@pytest.mark.parametrize("rows", [1, 3, 8, 16])
@pytest.mark.parametrize("features,inputs", [(3072, 2048), (2048, 8192), (1000, 520)])
def test_equals_linear(rows, features, inputs):
    torch.manual_seed(0)
    x = torch.randn(rows, inputs, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(features, inputs, device="cuda", dtype=torch.bfloat16) / inputs**0.5
    expected = (x.float() @ weight.float().t()).to(torch.bfloat16)
    torch.testing.assert_close(triton_linear.skinny_matmul(x, weight), expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("gated", [False, True])
def test_fused_norm_equals_the_unfused_path(residual, gated):
    torch.manual_seed(0)
    inputs, features = 2048, 1000
    x = torch.randn(1, inputs, device="cuda", dtype=torch.bfloat16)
    res = torch.randn(1, inputs, device="cuda", dtype=torch.bfloat16) if residual else None
    norm = (torch.rand(inputs, device="cuda") + 0.5).to(torch.bfloat16)
    weight = torch.randn(2 * features if gated else features, inputs, device="cuda", dtype=torch.bfloat16) / inputs**0.5
    total = x + res if residual else x
    expected = torch.nn.functional.linear(fused_ops.rms_norm(total, norm, 1e-5), weight)
    expected = fused_ops.silu_mul(expected) if gated else expected
    out, new_residual = triton_linear.normed_gemv(x, res, norm, 1e-5, weight, gated)
    torch.testing.assert_close(out, expected, atol=3e-2, rtol=3e-2)
    assert torch.equal(new_residual, total)


@pytest.mark.parametrize("residual", [False, True])
def test_the_normed_router_routes_as_the_unfused_norm_and_router(residual):
    """A Qwen3 MoE layer's norm and router as one kernel (SkinnyNormedRouter): the normed row it writes and the
    experts' output on its logits equal the unfused path's."""
    from engine_svc.model.decoder import NormedProjection, RMSNorm
    from engine_svc.model.moe import SparseMoe
    from tests.engine.families import tiny

    model = tiny("qwen3_moe").to("cuda", torch.bfloat16)
    experts = SparseMoe(model.model.layers[0].mlp, model.config)
    hidden = model.config.hidden_size
    norm = RMSNorm((torch.rand(hidden, device="cuda") + 0.5).to(torch.bfloat16), 1e-6, 0.0)
    x = torch.randn(1, hidden, device="cuda", dtype=torch.bfloat16)
    res = torch.randn(1, hidden, device="cuda", dtype=torch.bfloat16) if residual else None
    ops = fused_ops.FusedOps(compile_kernels=False)
    expected, expected_residual = NormedProjection(norm, experts).forward(x, res, ops)
    fused = triton_linear.SkinnyNormedRouter(norm, experts)
    normed = torch.empty_like(x)
    logits, total = fused._fused(x, res, normed)
    torch.testing.assert_close(normed, ops.rms_norm(x if res is None else x + res, norm.weight, 1e-6))
    torch.testing.assert_close(experts(normed, logits), expected, atol=3e-2, rtol=3e-2)
    assert torch.equal(total, expected_residual)
