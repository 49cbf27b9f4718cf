"""Prefix hashes: the keys of the engine's prefix cache and the routing key render publishes. One owner.

A prompt is cut into blocks of `block_size` tokens. Block i's hash is a digest of block i-1's hash and block
i's token ids, so a hash names the whole prefix up to the end of its block; block 0's parent is a digest of
the request's `cache_salt`, so requests with different salts never share a hash (tenants never share KV
blocks) and nobody can ask for another salt's prefix without knowing the salt. BLAKE2b with a 128-bit digest:
a collision would serve one prompt another prompt's cache, so the hash must resist made-up collisions, which
Python's `hash()` does not.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence

DIGEST_BYTES = 16
# The header a client (or the one-hop pipeline) sends on EngineService calls with render's `prefix_hash`, and
# on which the gateway's consistent hash picks the engine replica.
ROUTING_HEADER = "x-scaleout-prefix-hash"


def root(cache_salt: str, lora_id: int = 0) -> bytes:
    """The parent of a prompt's first block: a digest of the salt (the empty salt is a namespace too) and, for a
    sequence that runs with a LoRA adapter, the engine's id of it (its K/V differ from the base model's)."""
    lora = f"\0lora\0{lora_id}".encode() if lora_id else b""
    return hashlib.blake2b(b"scaleout.prefix.v1\0" + cache_salt.encode() + lora, digest_size=DIGEST_BYTES).digest()


def block_hash(parent: bytes, tokens: Sequence[int]) -> bytes:
    """The hash of a block of token ids that follows the block hashed `parent`."""
    return hashlib.blake2b(parent + array("q", tokens).tobytes(), digest_size=DIGEST_BYTES).digest()


def chain(cache_salt: str, tokens: Sequence[int], block_size: int) -> list[bytes]:
    """The hashes of every full block of `tokens` (each block_hash's, from one conversion of the ids to bytes)."""
    hashes, parent = [], root(cache_salt)
    data, width = memoryview(array("q", tokens).tobytes()), 8 * block_size
    for start in range(0, len(tokens) // block_size * width, width):
        parent = hashlib.blake2b(parent + data[start : start + width], digest_size=DIGEST_BYTES).digest()
        hashes.append(parent)
    return hashes


def prefix_key(cache_salt: str, tokens: Sequence[int], block_size: int) -> str:
    """Hex key of a prefix for routing: the hash of its last block, a trailing partial block included."""
    hashes = chain(cache_salt, tokens, block_size)
    tail = len(tokens) % block_size
    if tail or not hashes:
        hashes.append(block_hash(hashes[-1] if hashes else root(cache_salt), tokens[len(tokens) - tail :]))
    return hashes[-1].hex()


def named_key(cache_salt: str, name: str) -> str:
    """Hex routing key for a caller's own name of a group of requests (OpenAI's `prompt_cache_key`)."""
    return hashlib.blake2b(root(cache_salt) + b"name\0" + name.encode(), digest_size=DIGEST_BYTES).hexdigest()


def is_key(text: str) -> bool:
    """Whether `text` has the form of a key prefix_key makes: the block hash in lowercase hex."""
    return len(text) == 2 * DIGEST_BYTES and all(c in "0123456789abcdef" for c in text)


def routing_metadata(request) -> tuple[tuple[str, str], ...] | None:
    """gRPC metadata for an EngineService call carrying a GenerateRequest: its `prefix_hash` as the routing
    header (None when it has none: the gateway then picks any replica)."""
    return ((ROUTING_HEADER, request.prefix_hash),) if request.prefix_hash else None
