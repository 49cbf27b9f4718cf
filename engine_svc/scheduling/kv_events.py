"""What the block pool tells listeners about its prefix table: blocks entered, blocks evicted, table emptied.

The pool calls an `EventSink` (None when nobody listens: then it builds nothing) on the step thread, in the
order the table changes. The names here are ours; faces (engine_svc/serving/kv_publish) map them onto other
projects' wire formats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(slots=True)
class BlocksStored:
    """A run of consecutive full blocks of one sequence entered in the table."""

    hashes: list[bytes]  # prefix hashes (scaleout_common.prefix_hash), in order
    parent: bytes | None  # the hash of the block before the first; None: the first is the prompt's first block
    token_ids: list[int]  # block_size tokens per block, all blocks in order
    cache_salt: str  # the salt mixed into the chain's root (prefix_hash.root)
    lora_id: int = 0  # the LoRA adapter the blocks were computed with, also in the root (0: the base model)
    lora_name: str = ""  # ... by the name the sequence named it


@dataclass(slots=True)
class BlocksRemoved:
    """Blocks evicted from the table (their hashes no longer hit)."""

    hashes: list[bytes]


@dataclass(slots=True)
class AllBlocksCleared:
    """The table was emptied (a reset, or a fresh engine): nothing stored before is there."""


KvEvent = BlocksStored | BlocksRemoved | AllBlocksCleared


class EventSink(Protocol):
    """Takes the pool's table changes, on the step thread."""

    def add(self, event: KvEvent) -> None: ...
