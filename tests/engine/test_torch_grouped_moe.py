"""torch_grouped_moe.py: a mixture's experts through torch's grouped GEMM equal moe.py's per-expert reference
(CPU here: torch's grouped GEMM has a CPU kernel; the chooser that picks it on the GPU times both paths there)."""

from __future__ import annotations

import pytest
import torch

from engine_svc.model.moe import Gating, grouped_experts
from engine_svc.model.torch_grouped_moe import GroupedMmChooser, grouped_mm_experts, serves

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tokens", [1, 7, 64])
def test_grouped_gemm_equals_the_per_expert_reference(tokens, device):
    torch.manual_seed(0)
    experts, hidden, inner, top_k = 16, 64, 32, 4
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16, device=device)
    gate_up = (torch.randn(experts, 2 * inner, hidden, device=device) / hidden**0.5).to(torch.bfloat16)
    down = (torch.randn(experts, hidden, inner, device=device) / inner**0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, experts, device=device).topk(top_k, dim=1).indices
    weights = torch.softmax(torch.randn(tokens, top_k, device=device), dim=1).to(torch.bfloat16)
    got = grouped_mm_experts(x, gate_up, down, weights, ids, Gating())
    want = grouped_experts(x, gate_up, down, weights, ids, Gating())
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
    again = grouped_mm_experts(x, gate_up, down, weights, ids, Gating())
    assert torch.equal(got, again)  # no atomics: the same bits every time


def test_only_plain_bf16_experts_on_the_gpu_take_it():
    x, w = torch.zeros(128, 8, dtype=torch.bfloat16), torch.zeros(2, 8, 8, dtype=torch.bfloat16)
    assert serves(x, w, None, None, None)
    assert not serves(x, w, torch.ones(2, 8), None, None)  # fp8 row scales
    assert not serves(x, w, None, torch.zeros(2, 8), torch.zeros(2, 8))  # gpt-oss's biases
    assert not serves(x.float(), w.float(), None, None, None)
    assert not GroupedMmChooser.wins(x, w, w, 2, Gating(), None)  # CPU rows: the chooser never switches


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the chooser times on CUDA")
def test_the_served_path_for_many_tokens_equals_the_reference_whichever_is_chosen(monkeypatch):
    from engine_svc.model.triton_moe import fused_experts

    monkeypatch.setattr(GroupedMmChooser, "faster", {})  # what earlier tests chose is theirs

    torch.manual_seed(0)
    tokens, experts, hidden, inner, top_k = 256, 32, 256, 128, 4
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16, device="cuda")
    gate_up = (torch.randn(experts, 2 * inner, hidden, device="cuda") / hidden**0.5).to(torch.bfloat16)
    down = (torch.randn(experts, hidden, inner, device="cuda") / inner**0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, experts, device="cuda").topk(top_k, dim=1).indices
    weights = torch.softmax(torch.randn(tokens, top_k, device="cuda"), dim=1).to(torch.bfloat16)
    got = fused_experts(x, gate_up, down, weights, ids, Gating())  # the chooser times both paths here
    assert len(GroupedMmChooser.faster) == 1
    torch.testing.assert_close(got, grouped_experts(x, gate_up, down, weights, ids, Gating()), atol=3e-2, rtol=3e-2)
