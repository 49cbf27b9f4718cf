"""vLLM's KV-event wire format, held against vLLM 0.33's `vllm/distributed/kv_events.py`.

A batch is msgpack of `[ts, events, data_parallel_rank]` (EventBatch is `array_like`); each event is a map
tagged `"type": "BlockStored" | "BlockRemoved" | "AllBlocksCleared"` (msgspec's default tag, the class name),
defaults omitted. The structs below are vLLM's, field for field and in order (vLLM is not a dependency; msgspec
is, as in vLLM), so vLLM's own classes decode what we send (tests/engine/test_kv_events_zmq.py).

The mapping, whole:

| vLLM                          | ours (engine_svc/scheduling/kv_events.py)                                  |
|-------------------------------|----------------------------------------------------------------------------|
| BlockStored.block_hashes      | BlocksStored.hashes: 16-byte BLAKE2b prefix hashes (docs/engine.md)        |
| BlockStored.parent_block_hash | BlocksStored.parent (None for a prompt's first block, as vLLM)             |
| BlockStored.token_ids         | BlocksStored.token_ids                                                     |
| BlockStored.block_size        | the pool's block size                                                      |
| BlockStored.extra_keys        | one entry per block: `(cache_salt,)` on a first block when salted, else None |
| BlockStored.medium            | "GPU" (vLLM's name for the engine's own pool, whatever the device)         |
| BlockStored.group_idx         | 0 (one KV cache group)                                                     |
| lora_id, lora_name            | BlocksStored.lora_id, lora_name: the sequence's adapter (its id is also in |
|                               | the chain's root, prefix_hash.root); None for the base model, as vLLM      |
| BlockRemoved.block_hashes     | BlocksRemoved.hashes, the same way; medium "GPU", group_idx 0               |
| AllBlocksCleared              | AllBlocksCleared                                                           |
| EventBatch.ts                 | KvBatch.timestamp                                                          |
| EventBatch.data_parallel_rank | 0 (one rank per engine)                                                    |
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from engine_svc.scheduling import kv_events as ours
from engine_svc.serving.kv_hub import KvBatch

MEDIUM = "GPU"
ExternalBlockHash = bytes | int


class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):  # type: ignore[call-arg]
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):  # type: ignore[call-arg]
    pass


class BlockStored(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


def int_hashes() -> bool:
    """vLLM's VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES (default 1): whether hashes go out as 64-bit ints."""
    return bool(int(os.environ.get("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1")))


def external(h: bytes, as_int: bool) -> ExternalBlockHash:
    """vLLM's `maybe_convert_block_hash`: the hash's low 64 bits, big-endian, unsigned; or the bytes."""
    return int.from_bytes(h[-8:], "big") if as_int else h


def event(e: ours.KvEvent, block_size: int, as_int: bool = True) -> BlockStored | BlockRemoved | AllBlocksCleared:
    if isinstance(e, ours.BlocksStored):
        first = (e.cache_salt,) if e.parent is None and e.cache_salt else None
        return BlockStored(
            block_hashes=[external(h, as_int) for h in e.hashes],
            parent_block_hash=None if e.parent is None else external(e.parent, as_int),
            token_ids=e.token_ids,
            block_size=block_size,
            lora_id=e.lora_id or None,
            medium=MEDIUM,
            lora_name=e.lora_name or None,
            extra_keys=[first] + [None] * (len(e.hashes) - 1),
            group_idx=0,
        )
    if isinstance(e, ours.BlocksRemoved):
        return BlockRemoved(block_hashes=[external(h, as_int) for h in e.hashes], medium=MEDIUM, group_idx=0)
    return AllBlocksCleared()


def batch(b: KvBatch, block_size: int, as_int: bool = True) -> KVEventBatch:
    events = [event(e, block_size, as_int) for e in b.events]
    return KVEventBatch(ts=b.timestamp, events=events, data_parallel_rank=0)
