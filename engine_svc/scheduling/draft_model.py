"""Draft-model proposals for speculative decoding (vLLM's method "draft_model"): a small model of the target's
vocabulary, run by the same runner code on the same device, drafts k tokens as its greedy (argmax) choices.

The draft's K/V lives in a cache of its own laid out as the target's, indexed by the same block ids (one block
table, two caches): the pool's accounting, the blocks grown for drafts and handed back after the verify serve both.
Per sequence the draft remembers how far its cache holds the sequence's tokens. A proposal runs one catch-up chunk
over the tokens it has not seen (the whole context the first time; then the last accepted draft and the bonus or
correction), whose last row gives draft 1, then k - 1 single-token steps, each fed the draft before. Afterwards its
cache holds the context and drafts 1..k-1; the next proposal keeps those drafts the verify accepted (the
sequence's tokens there still equal them) and recomputes from the first that differs. A sequence whose blocks were
released (a preemption: the pool gives it a new block list) starts over. Catch-up tokens per step are capped by the
step budget: a long context is caught up over several steps (that sequence decodes plainly meanwhile), so the
draft's largest step stays within the target's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine_svc.scheduling.sequence import Chunk, Sequence


@dataclass
class _Seen:
    blocks: list[int]  # the sequence's block list when last run: another list means its blocks were released
    start: int  # the draft's cache holds the sequence's tokens before `start`
    drafts: list[int]  # and, from `start`, these tokens (drafts whose K/V it wrote)


class DraftModel:
    """Greedy drafts from a draft model's runner (step thread only)."""

    def __init__(self, runner):
        self.runner = runner
        self.seen: dict[Sequence, _Seen] = {}

    def forget(self, seq: Sequence) -> None:
        self.seen.pop(seq, None)
        self.runner.forget(seq)

    def _cached(self, seq: Sequence) -> int:
        """Tokens of `seq` (from its start) whose K/V the draft's cache holds; at most all but the last, whose
        logits the next draft needs."""
        seen = self.seen.get(seq)
        if seen is None or seen.blocks is not seq.block_ids:
            return 0
        end, n = seq.num_tokens - 1, 0
        while n < len(seen.drafts) and seen.start + n < end and seq.token_at(seen.start + n) == seen.drafts[n]:
            n += 1
        return min(seen.start + n, end)

    @torch.inference_mode()
    def propose(self, wanted: list[tuple[Sequence, int]], budget: int) -> list[list[int]]:
        """Up to k drafts for each (sequence, k) of `wanted`, whose blocks cover k tokens past its end; [] for a
        sequence still catching up (`budget`: the catch-up tokens this step may run)."""
        chunks, drafting = [], []
        for seq, k in wanted:
            start = self._cached(seq)
            size = min(seq.num_tokens - start, max(budget, 0))
            budget -= size
            if size:
                chunks.append(Chunk(seq, start, size))
            if start + size < seq.num_tokens:
                self.seen[seq] = _Seen(seq.block_ids, start + size, [])
            else:
                drafting.append((seq, k))
        logits = self.runner.execute(chunks) if chunks else None
        drafts: dict[Sequence, list[int]] = {}
        if drafting:
            assert logits is not None
            for (seq, _), token in zip(drafting, self._argmax(logits)):
                drafts[seq] = [token]
            ks = {k for _, k in drafting}
            if self.runner.chains_decode_steps and len(ks) == 1 and ks != {1}:
                self._chain(drafting, drafts)
            else:
                self._step_by_step(drafting, drafts)
        for seq, _ in drafting:
            self.seen[seq] = _Seen(seq.block_ids, seq.num_tokens, drafts[seq][:-1])
        return [drafts.get(seq, []) for seq, _ in wanted]

    def _argmax(self, logits: torch.Tensor) -> list[int]:
        return logits[:, : self.runner.vocab_size].argmax(-1).tolist()

    def _chain(self, drafting: list[tuple[Sequence, int]], drafts: dict[Sequence, list[int]]) -> None:
        """Drafts 2..k of sequences that all want k, chained on the device (the runner's decode loop: each step's
        argmax is the next one's input, one host read at the end)."""
        seqs, k = [seq for seq, _ in drafting], drafting[0][1]
        for seq in seqs:
            seq.append(drafts[seq][0])
        forward = self.runner.decode_loop([Chunk(seq, seq.num_tokens - 1, 1) for seq in seqs])
        greedy, steps = None, []
        for _ in range(k - 1):
            _, greedy = forward(greedy)
            steps.append(greedy.clone())
        for seq, row in zip(seqs, torch.stack(steps, 1).tolist()):
            seq.output_ids.pop()
            seq.num_tokens -= 1
            drafts[seq] += row

    def _step_by_step(self, drafting: list[tuple[Sequence, int]], drafts: dict[Sequence, list[int]]) -> None:
        """Drafts 2..k, one step each over the sequences still drafting, each draft in the sequence while the next
        is computed."""
        live = [(seq, k) for seq, k in drafting if k > 1]
        while live:
            for seq, _ in live:
                seq.append(drafts[seq][-1])
            tokens = self._argmax(self.runner.execute([Chunk(seq, seq.num_tokens - 1, 1) for seq, _ in live]))
            for (seq, _), token in zip(live, tokens):
                drafts[seq].append(token)
            live = [(seq, k) for seq, k in live if k > len(drafts[seq])]
        for seq, _ in drafting:
            fed = len(drafts[seq]) - 1
            if fed:
                del seq.output_ids[-fed:]
                seq.num_tokens -= fed
