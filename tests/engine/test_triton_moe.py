"""The Triton fused experts against the plain grouped path. On the GPU machine (bf16), or on the CPU through
Triton's interpreter (float32): `TRITON_INTERPRET=1 python -m pytest tests/engine/test_triton_moe.py`."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("the Triton kernels need CUDA (or TRITON_INTERPRET=1)", allow_module_level=True)
triton_moe = pytest.importorskip("engine_svc.model.triton_moe")

from engine_svc.model.fp8_linear import quantize_rows  # noqa: E402
from engine_svc.model.moe import Gating, Routing, grouped_experts, route  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32


def test_align_groups_assignments_by_expert_in_padded_runs():
    ids = torch.tensor([[3, 0], [3, 1], [0, 3]], device=DEVICE)
    sorted_ids, block_expert = triton_moe.align(ids, 5, block_m=4)
    pad = ids.numel()
    assert sorted_ids.tolist()[:12] == [1, 4, pad, pad, 3, pad, pad, pad, 0, 2, 5, pad]
    assert block_expert.tolist()[:4] == [0, 1, 3, -1] and set(block_expert.tolist()[3:]) == {-1}


@pytest.mark.parametrize("biased", [False, True])  # True: gpt-oss's biases and clamped gating
@pytest.mark.parametrize("tokens", [1, 5, 40])
def test_fused_experts_equal_the_grouped_path(tokens, biased):
    torch.manual_seed(0)
    experts, hidden, inner, top_k = 8, 64, 96, 3  # inner not a multiple of the 64-wide tiles
    x = torch.randn(tokens, hidden, device=DEVICE, dtype=DTYPE)
    router = torch.randn(experts, hidden, device=DEVICE, dtype=DTYPE)
    gate_up = torch.randn(experts, 2 * inner, hidden, device=DEVICE, dtype=DTYPE) / hidden**0.5
    down = torch.randn(experts, hidden, inner, device=DEVICE, dtype=DTYPE) / inner**0.5
    weights, ids = route(x, router, Routing("softmax", top_k, renormalize=True))
    gating, biases = Gating(), (None, None)
    if biased:
        gating = Gating(alpha=1.702, limit=1.0)
        biases = (
            torch.randn(experts, 2 * inner, device=DEVICE, dtype=DTYPE),
            torch.randn(experts, hidden, device=DEVICE, dtype=DTYPE),
        )
    got = triton_moe.fused_experts(x, gate_up, down, weights, ids, gating, *biases)
    wide = [None if b is None else b.float() for b in biases]
    expected = grouped_experts(x.float(), gate_up.float(), down.float(), weights.float(), ids, gating, *wide)
    tolerance = 3e-2 if DEVICE == "cuda" else 1e-4
    torch.testing.assert_close(got.float(), expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("tokens", [1, 40])
def test_fp8_experts_equal_the_grouped_path_and_stay_near_the_exact_experts(tokens):
    """e4m3 expert weights with a scale per row (SparseMoe.to_fp8): the kernel widens the tiles and scales the
    columns as the grouped path dequantizes; both within e4m3's rounding of the unquantized experts."""
    torch.manual_seed(1)
    experts, hidden, inner, top_k = 8, 64, 96, 2
    x = torch.randn(tokens, hidden, device=DEVICE, dtype=DTYPE)
    gate_up = torch.randn(experts, 2 * inner, hidden, device=DEVICE, dtype=DTYPE) / hidden**0.5
    down = torch.randn(experts, hidden, inner, device=DEVICE, dtype=DTYPE) / inner**0.5
    weights, ids = route(x, torch.randn(experts, hidden, device=DEVICE, dtype=DTYPE), Routing("softmax", top_k, True))
    (q1, s1), (q2, s2) = (quantize_rows(w.reshape(-1, w.shape[-1])) for w in (gate_up, down))
    q1, s1, q2, s2 = q1.view(gate_up.shape), s1.view(gate_up.shape[:2]), q2.view(down.shape), s2.view(down.shape[:2])
    got = triton_moe.fused_experts(x, q1, q2, weights, ids, Gating(), None, None, s1, s2)
    dequantized = grouped_experts(x.float(), q1, q2, weights.float(), ids, Gating(), None, None, s1, s2)
    exact = grouped_experts(x.float(), gate_up.float(), down.float(), weights.float(), ids, Gating())
    tolerance = 3e-2 if DEVICE == "cuda" else 1e-4
    torch.testing.assert_close(got.float(), dequantized, rtol=tolerance, atol=tolerance)
    assert (dequantized - exact).abs().max() < 0.1 * exact.abs().max()
