"""The KV blocks of a model whose sliding-window layers have a cache of their own (Gemma 2/3, gpt-oss, Mistral).

A layer with a window W reads, for the query at position p, only the keys of positions p - W + 1 .. p. Its cache
is a second pool (`windowed`, a BlockPool of its own size, model/kv_groups.py) and each sequence a second table
in it (`Sequence.window_block_ids`, as long as `block_ids`: entry i holds positions i * block_size on). Before a
sequence grows, the blocks of that table wholly before the window of the first position it will still compute
(num_computed - W + 1: every later position's window starts later, a chunked prefill's and a decode loop's
included) go back to the windowed pool and their entries become 0, the scratch block: the attention reads no key
there for any later query (the Triton kernels start at the window's first tile and mask what precedes the
window in it; SDPA masks the whole gathered table to the window). The full-attention layers keep every block,
in this pool itself (a BlockPool). Preemption releases both tables; the sequence recomputes.

Prefix caching runs in both pools under the same prefix hashes: a full windowed block enters the windowed table
when its full-attention twin enters this one, and stays there after it leaves the window (freed, evicted when
handed out again). A hit of m blocks needs all m in this table and, as vLLM's SlidingWindowManager
(find_longest_cache_hit), the windowed blocks of the window before the hit point, [m - ceil((W - 1) / bs), m),
still cached; else it is shortened to the longest m that has them. KV events describe this pool's table (the
full-attention layers' blocks); the windowed table tells no events.

Load figures (num_used, num_free) count full-attention blocks, the free ones scaled down when the windowed pool
is the fuller one, so a router sees the tighter of the two.
"""

from __future__ import annotations

from engine_svc.scheduling.block_pool import BlockPool
from engine_svc.scheduling.sequence import Sequence


class WindowedBlockPool(BlockPool):
    """Full-attention layers' blocks (this pool) and sliding-window layers' (`windowed`), window `window`."""

    def __init__(self, num_blocks: int, block_size: int, window: int, window_blocks: int, *, caching: bool = False):
        super().__init__(num_blocks, block_size, caching=caching)
        self.window = window
        self.windowed = BlockPool(window_blocks, block_size)  # its table is filled here (commit), not by itself
        # Windowed blocks a prefix-cache hit needs before its hit point: those holding the first query's window.
        self.window_hit_blocks = -(-(window - 1) // block_size)

    @property
    def num_free(self) -> int:
        full = len(self.free)
        return min(full, len(self.windowed.free) * self.usable // max(self.windowed.usable, 1))

    @property
    def num_used(self) -> int:
        return self.usable - self.num_free

    def grow(self, seq: Sequence, tokens: int) -> bool:
        self.drop_out_of_window(seq)
        missing = self.blocks_for(tokens) - len(seq.block_ids)
        if missing <= 0:
            return True
        if missing > len(self.free) or missing > len(self.windowed.free):
            return False
        super().grow(seq, tokens)
        seq.window_block_ids += [self.windowed.take() for _ in range(missing)]
        return True

    def drop_out_of_window(self, seq: Sequence) -> None:
        """Free `seq`'s windowed blocks wholly before position num_computed - window + 1 (released entries are a
        prefix of zeros: walk back from the last one due until one is met)."""
        table = seq.window_block_ids
        due = min(max(0, seq.num_computed - self.window + 1) // self.block_size, len(table))
        i = due - 1
        while i >= 0 and table[i]:
            self.windowed.unpin([table[i]])
            table[i] = 0
            i -= 1

    def shrink(self, seq: Sequence, tokens: int) -> None:
        keep = self.blocks_for(tokens)
        self.windowed.unpin([b for b in seq.window_block_ids[keep:] if b])
        del seq.window_block_ids[keep:]
        super().shrink(seq, tokens)

    def release(self, seq: Sequence) -> None:
        self.windowed.unpin([b for b in seq.window_block_ids if b])
        seq.window_block_ids = []
        super().release(seq)

    # ---- prefix cache -------------------------------------------------------------------------------

    def hit_blocks(self, seq: Sequence) -> int:
        """The full-attention hit, shortened to the longest whose window's windowed blocks are cached."""
        full = super().hit_blocks(seq)
        hashes, need, table = seq.block_hashes, self.window_hit_blocks, self.windowed.table
        best = run = 0
        for i in range(full):
            run = run + 1 if hashes[i] in table else 0
            if run >= min(need, i + 1):
                best = i + 1
        return best

    def take_cached(self, seq: Sequence) -> int:
        taken = super().take_cached(seq)
        hits = len(seq.block_ids)
        if hits:
            first = max(0, hits - self.window_hit_blocks)
            seq.window_block_ids = [0] * first
            for h in seq.block_hashes[first:hits]:
                block = self.windowed.table[h]
                self.windowed.hold(block)
                seq.window_block_ids.append(block)
        return taken

    def commit(self, seq: Sequence) -> None:
        full = seq.num_computed // self.block_size
        if self.caching and full > seq.num_committed_blocks:
            table, owner = self.windowed.table, self.windowed.hash_of
            for i, h in enumerate(self._hashes(seq, full)[seq.num_committed_blocks :], seq.num_committed_blocks):
                block = seq.window_block_ids[i]
                if block and h not in table:
                    table[h] = block
                    owner[block] = h
        super().commit(seq)

    def reset_prefix_cache(self) -> int:
        self.windowed.reset_prefix_cache()
        return super().reset_prefix_cache()
