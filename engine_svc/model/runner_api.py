"""What the step loop needs from a model runner: the plug point between the engine and a model backend.

`ModelRunner` (our fused decoder over the paged KV cache) and `TransformersRunner` (any causal LM through
transformers) implement it. What a runner cannot do is stated, not probed: `chains_decode_steps` says whether
`decode_loop` may be called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from engine_svc.scheduling.sequence import Chunk, Sequence

# Given the tokens sampled in the previous step (None the first time), runs the next decode step and returns
# (logits, the greedy tokens: each row's argmax, a device view that may be passed back in).
DecodeStep = Callable[[torch.Tensor | None], tuple[torch.Tensor, torch.Tensor]]


class Runner(Protocol):
    vocab_size: int
    device: torch.device
    chains_decode_steps: bool  # decode_loop can queue decode steps on the device, one ahead of the host
    # Its K/V lives in the pool's blocks, so a sequence may start on cached blocks another one computed
    # (prefix caching): its first chunk then starts past them.
    kv_in_pool_blocks: bool

    def execute(self, chunks: list[Chunk]) -> torch.Tensor:
        """Logits rows: one per sampling chunk (in order), then one per prompt-logprob position (in order), then
        one per draft token of each chunk with drafts (in order; the rows before its last)."""
        ...

    def decode_loop(self, chunks: list[Chunk]) -> DecodeStep:
        """Consecutive decode steps of the decode-only `chunks`, each fed the previous one's tokens on the
        device; the sequences' blocks must already cover every step. Only when `chains_decode_steps`."""
        ...

    def forget(self, seq: Sequence) -> None:
        """Drop what the runner keeps for a sequence that finished or was aborted."""
        ...
