"""The routing kernel (engine_svc/model/triton_routing.py) against moe.py's torch rules, in float32 (bf16 logits
tie, and ties break either way). On the GPU machine, or on the CPU through Triton's interpreter:
`TRITON_INTERPRET=1 python -m pytest tests/engine/test_triton_routing.py`."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("the Triton kernels need CUDA (or TRITON_INTERPRET=1)", allow_module_level=True)
triton_routing = pytest.importorskip("engine_svc.model.triton_routing")

from engine_svc.model.moe import Routing, route  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
RULES = [
    Routing("softmax", 4, renormalize=True),  # Qwen3 MoE
    Routing("softmax", 4),
    Routing("softmax_top_k", 4),  # gpt-oss
    Routing("sigmoid_groups", 4, True, groups=4, top_groups=2, scale=2.5),  # DeepSeek V3
    Routing("sigmoid_groups", 4, False, groups=4, top_groups=4, scale=1.0),
    Routing("sigmoid_groups", 3, True, scale=1.5),  # GLM-4.5: one group
]


@pytest.mark.parametrize("routing", RULES, ids=lambda r: f"{r.rule}-{r.groups}-{r.top_groups}-{r.renormalize}")
@pytest.mark.parametrize("corrected", [False, True])
def test_the_kernel_equals_the_torch_rule(routing, corrected):
    if corrected and routing.rule != "sigmoid_groups":
        pytest.skip("the correction bias is the grouped rule's")
    torch.manual_seed(3)
    experts = 24 if routing.groups > 1 else 20  # groups of 6; 20: not a power of 2
    x, router = torch.randn(9, 32), torch.randn(experts, 32)
    correction = torch.randn(experts) * 0.1 if corrected else None
    weights, ids = route(x, router, routing, correction=correction)  # the torch rule, on the CPU
    logits = torch.nn.functional.linear(x, router).to(DEVICE)
    got_weights, got_ids = triton_routing.routed(
        logits, routing, None if correction is None else correction.to(DEVICE), torch.float32
    )
    assert got_ids.cpu().tolist() == ids.tolist()
    torch.testing.assert_close(got_weights.cpu(), weights, rtol=1e-5, atol=1e-6)
