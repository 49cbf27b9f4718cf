"""Continuous batching: which sequences run this step, and which KV blocks they own.

Every step takes all running decodes (one token each), then prefill chunks (running ones first, then
waiting ones by priority and arrival) until the token budget is spent, so a long prompt is split over
steps instead of stalling the decodes. When a decode needs a block and none is free, the most recently
admitted sequence is preempted: its blocks are freed and it is recomputed later (prompt + output so far).
A sequence's first chunk starts after the longest prefix of it that the pool's prefix cache holds; a
preempted sequence's full blocks stay cached (unless evicted meanwhile), so its recompute mostly finds them.
With `max_loras` set, a waiting sequence whose LoRA adapter would make more distinct adapters run at once waits
(others behind it may go first), as vLLM's scheduler skips it. A prompt whose logprobs were asked for is prefilled
`prompt_logprob_rows` tokens a step at most: each of its positions costs a row of logits over the vocabulary and
their log-softmax, so one long prompt's step stays within PROMPT_LOGPROBS_STEP_BYTES (not gigabytes) and other
requests' decodes run between its chunks.
"""

from __future__ import annotations

import heapq

from engine_svc.scheduling.block_pool import BlockPool
from engine_svc.scheduling.sequence import Chunk, Sequence

# Memory a step may spend on one prompt's logprobs; each position takes ~10 bytes per vocabulary entry (logits,
# their float32 log-softmax, the rank comparison): 2,048 rows of SmolLM2's 49,152 took +1.75 GB in one step.
PROMPT_LOGPROBS_STEP_BYTES = 128 << 20
PROMPT_LOGPROBS_BYTES_PER_ENTRY = 10


def prompt_logprob_rows(vocab_size: int) -> int:
    """Prompt positions with logprobs per step: 273 for a 49,152 vocabulary, 104 for 128,256 (at least 16)."""
    return max(16, PROMPT_LOGPROBS_STEP_BYTES // (vocab_size * PROMPT_LOGPROBS_BYTES_PER_ENTRY))


class Scheduler:
    def __init__(self, pool: BlockPool, max_num_seqs: int, max_batched_tokens: int, prompt_logprob_rows: int = 256):
        self.pool = pool
        self.max_num_seqs = max_num_seqs
        self.max_batched_tokens = max_batched_tokens
        self.prompt_logprob_rows = prompt_logprob_rows
        self.running: list[Sequence] = []  # admission order
        self.waiting: list[tuple[int, int, Sequence]] = []  # heap of (priority, arrival, seq)
        self.num_preemptions = 0
        self.waiting_uncached = 0  # the waiting sequences' num_uncached_queued, summed
        self.max_loras = 0  # distinct LoRA adapters among the running sequences at most (0: LoRA is off)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    def add(self, seq: Sequence) -> None:
        seq.num_uncached_queued = self.pool.uncached_tokens(seq)
        self.waiting_uncached += seq.num_uncached_queued
        heapq.heappush(self.waiting, (seq.priority, seq.arrival, seq))

    def pending_prefill_tokens(self) -> int:
        """Tokens to compute before the next sample: the waiting sequences' (less the prefix each found cached when
        queued) and the running ones' still prefilling. Readable from another thread (it only reads)."""
        return self.waiting_uncached + sum(r for s in self.running if (r := s.remaining) > 1)

    def remove(self, seqs: set[Sequence]) -> None:
        """Drop finished or aborted sequences and free their blocks."""
        for seq in seqs:
            self.pool.release(seq)
        self.running = [s for s in self.running if s not in seqs]
        if any(entry[2] in seqs for entry in self.waiting):
            self.waiting_uncached -= sum(entry[2].num_uncached_queued for entry in self.waiting if entry[2] in seqs)
            self.waiting = [entry for entry in self.waiting if entry[2] not in seqs]
            heapq.heapify(self.waiting)

    def schedule(self) -> list[Chunk]:
        """This step's chunks: decodes first, then prefill chunks."""
        budget = self.max_batched_tokens
        decodes: list[Chunk] = []
        preempted: set[Sequence] = set()
        for seq in list(self.running):
            if seq.remaining != 1 or seq in preempted:
                continue
            while not self.pool.grow(seq, seq.num_tokens):
                victim = self.running[-1]
                self._preempt(victim)
                preempted.add(victim)
                if victim is seq:
                    break
            if seq not in preempted:
                decodes.append(Chunk(seq, seq.num_computed, 1))
                budget -= 1
        if preempted:
            decodes = [c for c in decodes if c.seq not in preempted]
        prefills: list[Chunk] = []
        for seq in self.running:
            if seq.remaining > 1 and budget > 0:
                chunk = self._prefill_chunk(seq, budget)
                if chunk is None:
                    break
                prefills.append(chunk)
                budget -= chunk.num_tokens
        skipped = []  # waiting sequences of an adapter that cannot run now (max_loras)
        adapters = {s.lora_id for s in self.running} - {0} if self.max_loras else set()
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0][2]
            if self.max_loras and seq.lora_id and seq.lora_id not in adapters and len(adapters) >= self.max_loras:
                skipped.append(heapq.heappop(self.waiting))
                continue
            self.pool.take_cached(seq)
            chunk = self._prefill_chunk(seq, budget)
            if chunk is None:
                self.pool.release(seq)  # hand the cached blocks back until it fits
                break
            self.pool.admitted(seq)
            heapq.heappop(self.waiting)
            self.waiting_uncached -= seq.num_uncached_queued
            self.running.append(seq)
            if seq.lora_id:
                adapters.add(seq.lora_id)
            prefills.append(chunk)
            budget -= chunk.num_tokens
        for entry in skipped:
            heapq.heappush(self.waiting, entry)
        return decodes + prefills

    def computed(self, seq: Sequence, tokens: int) -> None:
        """`tokens` more of `seq` have their K/V in the cache: full blocks enter the prefix cache."""
        seq.num_computed += tokens
        self.pool.commit(seq)

    def reserve(self, seqs: list[Sequence], steps: int) -> bool:
        """Blocks for `steps` decode steps of each of `seqs` (so they can run back to back); False when short."""
        return all(self.pool.grow(seq, seq.num_tokens + steps - 1) for seq in seqs)

    def _prefill_chunk(self, seq: Sequence, budget: int) -> Chunk | None:
        size = min(seq.remaining, budget, self.prompt_logprob_rows if seq.want_prompt_logprobs else budget)
        if not self.pool.grow(seq, seq.num_computed + size):
            return None
        return Chunk(seq, seq.num_computed, size)

    def preempt_all(self) -> None:
        """Every running sequence back to the queue, its blocks freed: it recomputes its prompt and output so far
        when admitted again (after a weight change, or with the KV cache released)."""
        for seq in list(reversed(self.running)):
            self._preempt(seq)

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.pool.release(seq)
        self.num_preemptions += 1
        seq.num_preemptions += 1
        self.add(seq)
