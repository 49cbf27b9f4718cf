"""The KV cache's blocks as the scheduler hands them out: a free list, and each sequence's block table.

The cache tensors belong to the model runner. The paged runner keeps a sequence's K/V in exactly the blocks of
its `block_ids`, so releasing them frees its cache; the transformers runner keeps caches of its own but is
counted here all the same, so admission and load figures do not depend on the backend.
"""

from __future__ import annotations

import math

from engine_svc.scheduling.sequence import Sequence


class BlockPool:
    """Free list of KV blocks. Block 0 is reserved as the scratch target of padded rows."""

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free = list(range(num_blocks - 1, 0, -1))

    @property
    def usable(self) -> int:
        return self.num_blocks - 1

    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def num_used(self) -> int:
        return self.usable - len(self.free)

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    def grow(self, seq: Sequence, tokens: int) -> bool:
        """Give `seq` blocks for `tokens` tokens in total; False (and nothing taken) when too few are free."""
        if tokens <= len(seq.block_ids) * self.block_size:
            return True
        missing = self.blocks_for(tokens) - len(seq.block_ids)
        if missing > len(self.free):
            return False
        for _ in range(max(missing, 0)):
            seq.block_ids.append(self.free.pop())
        return True

    def release(self, seq: Sequence) -> None:
        self.free.extend(reversed(seq.block_ids))
        seq.block_ids = []
        seq.num_computed = 0
