"""The KV cache's blocks as the scheduler hands them out: free blocks, each sequence's block table, and the
prefix cache.

The cache tensors belong to the model runner. The paged runner keeps a sequence's K/V in exactly the blocks of
its `block_ids`, so releasing them frees its cache; the transformers runner keeps caches of its own but is
counted here all the same, so admission and load figures do not depend on the backend.

Prefix caching (automatic, on unless `caching=False`): once a block is full of computed K/V it is entered in a
table under its prefix hash (`scaleout_common.prefix_hash`: the hash of its tokens chained with the previous
block's, the request's cache salt and LoRA adapter mixed into the first). A new sequence takes the longest run of
its prompt's blocks found there instead of computing them, sharing them with every other sequence that holds them
(reference counts). A block nobody references stays in the table and on the free list, which hands out blocks
least recently used first, blocks holding nothing reusable before all others; handing a cached block out
evicts it from the table. Only full blocks are shared, and a sequence only ever writes into blocks past its
cached ones, so a shared block is never written.

KV events: with an `events` sink set, every change to the table is told to it as it happens (kv_events.py):
a run of blocks entered, a block evicted, the table emptied. Without one (the default) nothing is built.
"""

from __future__ import annotations

import math
from collections import OrderedDict

from engine_svc.scheduling.kv_events import AllBlocksCleared, BlocksRemoved, BlocksStored, EventSink
from engine_svc.scheduling.sequence import Sequence
from scaleout_common import prefix_hash


class BlockPool:
    """KV blocks with reference counts and a prefix table. Block 0 is reserved as the scratch target of padded
    rows."""

    def __init__(self, num_blocks: int, block_size: int, *, caching: bool = False):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.caching = caching
        # Unreferenced blocks in the order they are handed out: first those holding nothing reusable, then
        # cached ones, least recently released first.
        self.free: OrderedDict[int, None] = OrderedDict.fromkeys(range(1, num_blocks))
        self.refs = [0] * num_blocks
        self.table: dict[bytes, int] = {}  # prefix hash -> block holding its K/V
        self.hash_of: dict[int, bytes] = {}  # the reverse, for the blocks in the table
        self.queried_tokens = 0  # prompt tokens of the sequences admitted so far
        self.hit_tokens = 0  # of which served from the cache
        self.events: EventSink | None = None  # told of every change to the table (kv_events.py)

    @property
    def usable(self) -> int:
        return self.num_blocks - 1

    @property
    def num_free(self) -> int:
        """Blocks no sequence holds (cached ones included: they are handed out when needed)."""
        return len(self.free)

    @property
    def num_used(self) -> int:
        """Blocks some sequence holds."""
        return self.usable - len(self.free)

    @property
    def num_cached(self) -> int:
        """Blocks in the prefix table, held or not."""
        return len(self.hash_of)

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    def grow(self, seq: Sequence, tokens: int) -> bool:
        """Give `seq` blocks for `tokens` tokens in total; False (and nothing taken) when too few are free."""
        missing = self.blocks_for(tokens) - len(seq.block_ids)
        if missing <= 0:
            return True
        if missing > len(self.free):
            return False
        seq.block_ids += [self.take() for _ in range(missing)]
        return True

    def take(self) -> int:
        """The next free block, held once (evicted from the prefix table if it was there); one must be free."""
        block, _ = self.free.popitem(last=False)
        self._evict(block)
        self.refs[block] = 1
        return block

    def hold(self, block: int) -> None:
        """One more hold on `block`, taking it off the free list if nobody held it (a prefix-cache hit)."""
        if self.refs[block] == 0:
            del self.free[block]
        self.refs[block] += 1

    def shrink(self, seq: Sequence, tokens: int) -> None:
        """Hand back `seq`'s blocks past those `tokens` tokens need (grown for speculative tokens that were
        rejected: past num_computed, so never shared nor in the prefix table)."""
        keep = self.blocks_for(tokens)
        if len(seq.block_ids) > keep:
            self.unpin(seq.block_ids[keep:])
            del seq.block_ids[keep:]

    def release(self, seq: Sequence) -> None:
        """Drop `seq`'s hold on its blocks. Unreferenced cached blocks go to the back of the free list (the last
        block first, so a prefix is evicted from its end), the others to the front."""
        self.unpin(seq.block_ids)
        seq.block_ids = []
        seq.num_computed = 0
        seq.num_committed_blocks = 0

    def pin(self, blocks: list[int]) -> None:
        """One more hold on each of `blocks` (held already): a prefill's blocks kept for a decode engine
        (kv_handoffs.py) stay out of the free list after their sequence lets them go."""
        for block in blocks:
            self.refs[block] += 1

    def unpin(self, blocks: list[int]) -> None:
        """Drop one hold on each of `blocks`, the last block first (as release)."""
        for block in reversed(blocks):
            self.refs[block] -= 1
            if self.refs[block] == 0:
                self.free[block] = None
                if block not in self.hash_of:
                    self.free.move_to_end(block, last=False)

    # ---- prefix cache -------------------------------------------------------------------------------

    def take_cached(self, seq: Sequence) -> int:
        """For a sequence holding no blocks: take the cached blocks of its longest cached prefix (at most all
        but its last token, which must run to be sampled from) and count them computed. Returns the tokens
        taken."""
        if not self.caching or seq.block_ids:
            return 0
        hashes = self._hashes(seq, self.hit_blocks(seq))
        for h in hashes:
            block = self.table[h]
            self.hold(block)
            seq.block_ids.append(block)
        seq.num_committed_blocks = len(seq.block_ids)
        seq.num_computed = len(seq.block_ids) * self.block_size
        return seq.num_computed

    def admitted(self, seq: Sequence) -> None:
        """Count a sequence's first admission in the hit figures (a recompute after preemption is not a query)."""
        if seq.num_cached_tokens is None:
            seq.num_cached_tokens = seq.num_computed
            self.queried_tokens += len(seq.prompt_ids)
            self.hit_tokens += seq.num_computed

    def commit(self, seq: Sequence) -> None:
        """Enter `seq`'s blocks that are now full of computed K/V in the prefix table (call after its
        num_computed moved on). A block whose prefix is already there under another block stays out of the
        table (it was computed twice at once) and is freed first when released."""
        if not self.caching:
            return
        full = seq.num_computed // self.block_size
        if full <= seq.num_committed_blocks:
            return
        hashes = self._hashes(seq, full)
        run = -1  # first block of the run of blocks entered now (for the event), -1: none
        for i in range(seq.num_committed_blocks, full):
            if hashes[i] not in self.table:
                self.table[hashes[i]] = seq.block_ids[i]
                self.hash_of[seq.block_ids[i]] = hashes[i]
                if run < 0:
                    run = i
            elif run >= 0:
                self._stored(seq, hashes, run, i)
                run = -1
        if run >= 0:
            self._stored(seq, hashes, run, full)
        seq.num_committed_blocks = full

    def uncached_tokens(self, seq: Sequence) -> int:
        """Of `seq`'s tokens, how many take_cached would leave to compute now (it takes no blocks)."""
        if not self.caching or seq.block_ids:
            return seq.num_tokens - seq.num_computed
        return seq.num_tokens - self.hit_blocks(seq) * self.block_size

    def hit_blocks(self, seq: Sequence) -> int:
        """How many of `seq`'s first blocks a prefix-cache hit takes: the longest run found in the table, at
        most all but its last token and, while it owes prompt logprob rows, none holding an owed position (its
        logits come from running it): a prompt scored from prompt_logprob_start on, or one preempted mid-prefill,
        takes the blocks before its first owed row. vLLM reads no cached block for such a request."""
        limit = min(seq.num_tokens - 1, seq.score_from) if seq.want_prompt_logprobs else seq.num_tokens - 1
        hits = 0
        for h in self._hashes(seq, limit // self.block_size):
            if h not in self.table:
                break
            hits += 1
        return hits

    def reset_prefix_cache(self) -> int:
        """Empty the prefix table: nothing computed so far is reused. A block nobody holds moves to the front of
        the free list (it holds nothing reusable now); a held one stays with its holders. Returns how many blocks
        were in the table."""
        dropped = len(self.hash_of)
        for block in self.hash_of:
            if self.refs[block] == 0:
                self.free.move_to_end(block, last=False)
        self.table.clear()
        self.hash_of.clear()
        if self.events is not None:
            self.events.add(AllBlocksCleared())
        return dropped

    def _hashes(self, seq: Sequence, blocks: int) -> list[bytes]:
        """The prefix hashes of `seq`'s first `blocks` full blocks, computed once per sequence."""
        hashes, size = seq.block_hashes, self.block_size
        while len(hashes) < blocks:
            i = len(hashes)
            parent = hashes[-1] if hashes else prefix_hash.root(seq.cache_salt, seq.lora_id)
            hashes.append(prefix_hash.block_hash(parent, seq.tokens(i * size, (i + 1) * size)))
        return hashes[:blocks]

    def _stored(self, seq: Sequence, hashes: list[bytes], start: int, end: int) -> None:
        """Tell the sink that `seq`'s blocks [start, end) entered the table."""
        if self.events is not None:
            size = self.block_size
            parent = hashes[start - 1] if start else None
            tokens = seq.tokens(start * size, end * size)
            self.events.add(BlocksStored(hashes[start:end], parent, tokens, seq.cache_salt, seq.lora_id, seq.lora_name))

    def _evict(self, block: int) -> None:
        h = self.hash_of.pop(block, None)
        if h is not None and self.table.get(h) == block:
            del self.table[h]
            if self.events is not None:
                self.events.add(BlocksRemoved([h]))
