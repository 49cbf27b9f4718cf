"""--head-dtype: the vocabulary head's dtype, vLLM's `head_dtype` (there an hf_overrides key, `{"head_dtype":
"float32"}`; "model", its default for generation models, keeps the model's dtype).

In float32 the head multiplies the last hidden state, cast up, by a float32 copy of its weight (of the embedding's
when the two are tied), so logits and logprobs are what a trainer computing its head in float32 gets from the
same hidden state: RL's consistency between the sampler's and the trainer's logprobs. It costs a float32 copy of
the head (vocab x hidden x 4 bytes: 2.1 GB for Llama 3 8B's 128256 x 4096) and a float32 product per sampled row.
Both backends see it: the paged decoder's VocabHead reads the module's weight, the transformers runner calls it.
"""

from __future__ import annotations

import torch
from torch import nn

HEAD_DTYPES = ("model", "float32")


class Float32Head(nn.Module):
    """A vocabulary head computed in float32 from a hidden state in any dtype."""

    def __init__(self, head: nn.Linear):
        super().__init__()
        self.weight = nn.Parameter(head.weight.detach().float(), requires_grad=False)  # a copy: ties stay intact
        self.bias = None if head.bias is None else nn.Parameter(head.bias.detach().float(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x.float(), self.weight, self.bias)


def apply_head_dtype(hf_model, head_dtype: str) -> str:
    """Puts `hf_model`'s vocabulary head in `head_dtype` (one of HEAD_DTYPES); the dtype it computes in."""
    if head_dtype not in HEAD_DTYPES:
        raise ValueError(f"--head-dtype {head_dtype}: one of {', '.join(HEAD_DTYPES)}")
    head = hf_model.lm_head
    if head_dtype == "float32" and head.weight.dtype != torch.float32:
        hf_model.lm_head = Float32Head(head)
    return str(hf_model.lm_head.weight.dtype).removeprefix("torch.")
