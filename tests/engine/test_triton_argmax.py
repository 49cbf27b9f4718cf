"""The chunked Triton row argmax against torch.argmax. CUDA only: `python -m pytest tests/engine/test_triton_argmax.py`
on the GPU machine."""

from __future__ import annotations

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("the Triton kernels need CUDA", allow_module_level=True)
triton_argmax = pytest.importorskip("engine_svc.model.triton_argmax")


@pytest.mark.parametrize("vocab", [128256, 49152, 997])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_equals_torch_argmax_with_the_first_of_ties(vocab, dtype):
    torch.manual_seed(0)
    logits = torch.randn(5, vocab, device="cuda")
    logits[1] = 0.0  # all tied: the first
    logits[2, 5] = logits[2, vocab - 2] = 50.0  # equal maxima in different chunks
    logits[3, -1] = 60.0  # the last entry, in a partial chunk
    logits = logits.to(dtype)
    assert torch.equal(triton_argmax.argmax_rows(logits), logits.argmax(-1))
    out = torch.full((5,), -1, dtype=torch.int64, device="cuda")
    assert triton_argmax.argmax_rows(logits, out=out) is out and torch.equal(out, logits.argmax(-1))
