"""The CPU layouts of the decoder's projections compute what the fused ones do: gate_up as two matmuls
(SplitGateUp) and the vocabulary head either side of its row threshold."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from engine_svc.model import fused_ops
from engine_svc.model.decoder import SplitGateUp, VocabHead


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("rows", [1, 8, 64])
def test_split_gate_up_equals_the_fused_swiglu(bias, rows):
    torch.manual_seed(0)
    fused = nn.Linear(32, 2 * 48, bias=bias)
    x = torch.randn(rows, 32)
    with torch.inference_mode():
        expected = fused_ops.silu_mul(fused(x))
        got = SplitGateUp(fused)(x)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("rows", [1, VocabHead.TRANSPOSED_BELOW_ROWS - 1, VocabHead.TRANSPOSED_BELOW_ROWS, 40])
def test_vocab_head_either_layout_gives_the_logits(rows):
    torch.manual_seed(0)
    lm_head = nn.Linear(32, 300, bias=False)
    x = torch.randn(rows, 32)
    with torch.inference_mode():
        got = VocabHead(lm_head)(x)
        expected = lm_head(x)
    assert got.is_contiguous()
    torch.testing.assert_close(got, expected)
