"""The transformers backend: any causal LM, one forward per chunk with a per-sequence DynamicCache.

Slow but general: it serves architectures the fused runner does not know, and is the correctness baseline.
Block accounting still runs through the scheduler's pool so admission and load reporting stay the same.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from engine_svc.model.runner_api import DecodeStep
from engine_svc.scheduling.sequence import Chunk, Sequence


class TransformersRunner:
    """A `Runner` that keeps one DynamicCache per sequence and runs one step per `execute`."""

    chains_decode_steps = False  # one forward per chunk from host token ids: nothing to chain on the device
    kv_in_pool_blocks = False  # its own DynamicCache per sequence: no prefix caching

    def __init__(self, hf_model):
        self.model = hf_model
        self.device = next(hf_model.parameters()).device
        self.vocab_size = hf_model.config.vocab_size
        self.caches: dict[int, DynamicCache] = {}

    def forget(self, seq: Sequence) -> None:
        self.caches.pop(id(seq), None)

    def decode_loop(self, chunks: list[Chunk]) -> DecodeStep:
        raise NotImplementedError("the transformers runner does not chain decode steps")

    @torch.inference_mode()
    def execute(self, chunks: list[Chunk]) -> torch.Tensor:
        sample_rows, logprob_rows, draft_rows = [], [], []
        for c in chunks:
            if c.start == 0:
                self.caches[id(c.seq)] = DynamicCache(config=self.model.config)
            elif (extra := self.caches[id(c.seq)].get_seq_length() - c.start) > 0:
                self.caches[id(c.seq)].crop(-extra)  # rejected speculative tokens' K/V
            ids = torch.tensor([c.seq.tokens(c.start, c.start + c.num_tokens)], device=self.device)
            positions = torch.arange(c.start, c.start + c.num_tokens, device=self.device)[None]
            logits = self.model(
                input_ids=ids, position_ids=positions, past_key_values=self.caches[id(c.seq)], use_cache=True
            ).logits[0]
            if c.samples:
                sample_rows.append(logits[-1])
            logprob_rows += [logits[p - c.start] for p in c.prompt_logprob_positions]
            draft_rows += logits[c.num_tokens - 1 - c.num_draft : c.num_tokens - 1]
        rows = sample_rows + logprob_rows + draft_rows
        return torch.stack(rows) if rows else torch.empty(0)
