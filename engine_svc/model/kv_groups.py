"""How a model's layers split into KV cache groups, and how many blocks each group gets from a memory budget.

Layers with a sliding window W (family.py `windows`) read only the last W positions, so they form a group with a
pool of their own (scheduling/window_pool.py) that holds a running sequence's window, not its whole context; the
other layers (full attention) form the main group. A model with no windowed layer, or whose window covers the
whole context anyway (nothing would ever be freed), or with windows of several sizes, keeps one group: every
layer in the main pool's blocks, as before.

Sizing: the windowed pool gets what every running sequence can hold at once (its window, the block it writes
into and a decode loop's lookahead; a step's chunk besides), never more blocks than one group would have had at
the same memory; the main group gets the rest. So the windowed group never holds fewer blocks than a single pool
would, and the full-attention layers gain what the windowed ones no longer keep.
"""

from __future__ import annotations

from dataclasses import dataclass


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


@dataclass(frozen=True)
class KvGroups:
    window: int = 0  # the windowed group's window; 0: one group
    full_layers: int = 0
    window_layers: int = 0
    window_need: int = 0  # windowed blocks every running sequence's windows and a step's chunk take at most
    window_least: int = 0  # windowed blocks one sequence's window and a whole step's chunk take

    @classmethod
    def of(
        cls,
        windows: tuple[int, ...],
        *,
        block_size: int,
        max_model_len: int,
        max_num_seqs: int,
        step_tokens: int,
        lookahead: int = 1,
    ) -> KvGroups:
        """`windows`: each layer's (0: full attention); `step_tokens`: a step's budget; `lookahead`: tokens a
        sequence's blocks may cover past its next one (a decode loop's steps, speculative tokens)."""
        sizes = {w for w in windows if w}
        per_seq = _blocks(max(sizes, default=1) - 1 + lookahead, block_size) + 1
        if len(sizes) != 1 or per_seq + 1 >= _blocks(max_model_len, block_size):
            return cls(full_layers=len(windows))
        chunk = _blocks(step_tokens, block_size)
        windowed = sum(1 for w in windows if w)
        return cls(
            window=sizes.pop(),
            full_layers=len(windows) - windowed,
            window_layers=windowed,
            window_need=1 + max_num_seqs * (per_seq + 1) + chunk,
            window_least=1 + per_seq + 1 + chunk,
        )

    def split(self, budget: int, layer_bytes: int, *, extra_bytes: int = 0, wanted: int, cap: bool) -> tuple[int, int]:
        """(main group's blocks, windowed group's blocks: 0 with one group) out of `budget` bytes, `layer_bytes`
        a layer's block (`extra_bytes` more per main block: a draft model's cache). `wanted`: the blocks max_num_seqs
        whole sequences take; `cap`: no more main blocks than that (CPU: a fixed budget, not all of memory)."""
        main_bytes = self.full_layers * layer_bytes + extra_bytes
        window_bytes = self.window_layers * layer_bytes
        one_group = max(2, budget // (main_bytes + window_bytes))
        if cap:
            one_group = min(one_group, max(2, wanted))
        if not self.window:
            return one_group, 0
        window = max(self.window_least, min(self.window_need, one_group))
        if not main_bytes:  # every layer windowed: the main blocks are bookkeeping (prefix hashes), no memory
            return max(2, wanted), window
        main = max(2, (budget - window * window_bytes) // main_bytes)
        return (min(main, max(2, wanted)) if cap else main), window

    def given(self, num_blocks: int) -> tuple[int, int]:
        """--num-kv-blocks N: N main blocks, the windowed group what it needs of N (at least one sequence's)."""
        if not self.window:
            return num_blocks, 0
        return num_blocks, max(self.window_least, min(self.window_need, num_blocks))
