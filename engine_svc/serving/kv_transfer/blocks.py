"""The paged KV cache's blocks as bytes: what a prefill engine streams (KvTransferService) and a decode engine lands
in blocks of its own.

A block on the wire is its layers in order, each layer's rows [block_size, 2, num_kv_heads, head_dim] as the
runner stores them (runner.py: one tensor per layer, a row per cached token), so reading and landing are one
gather and one scatter per layer. Two engines exchange blocks only when their `KvLayout`s are equal: same block
size, element type, shapes and model fingerprint (a digest of the model's name, shapes, embedding rows and
tokenizer; K/V from other weights would decode to wrong tokens).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from engine_svc.model.runner import ModelRunner
from scaleout.v1 import kv_transfer_pb2

CHUNK_BYTES = 4 << 20  # per stream message (at least one block): under the channels' 64 MiB, few messages


@dataclass
class Pulled:
    """A prompt's K/V pulled from a prefill engine: [blocks, layers, bytes of a layer's block], on the host
    (streamed) or on this engine's device (copied there on a side stream: `ready` once the copy is done)."""

    data: torch.Tensor  # uint8
    num_tokens: int
    ready: torch.cuda.Event | torch.Event | None = None
    transport: str = "grpc_stream"  # transport.py's name of the way it came


def layout_of(runner: ModelRunner, model_name: str, tokenizer_fingerprint: str) -> kv_transfer_pb2.KvLayout:
    layer = runner.model.layer0
    digest = hashlib.sha256(f"{model_name}|{tokenizer_fingerprint}|{runner.vocab_size}".encode())
    embed = runner.model.embed.weight
    digest.update(str(tuple(embed.shape)).encode())
    digest.update(embed[:2].detach().float().cpu().numpy().tobytes())  # other weights, other rows
    return kv_transfer_pb2.KvLayout(
        block_size=runner.block_size,
        dtype=str(runner.kv_dtype).removeprefix("torch."),
        num_layers=len(runner.kv_caches),
        num_kv_heads=layer.num_kv_heads,
        head_dim=layer.head_dim,
        fingerprint=digest.hexdigest()[:32],
    )


def mismatch(mine: kv_transfer_pb2.KvLayout, theirs: kv_transfer_pb2.KvLayout) -> str:
    """The first field where two layouts differ, as `name: mine vs theirs` ("" when they match)."""
    for field in kv_transfer_pb2.KvLayout.DESCRIPTOR.fields:
        a, b = getattr(mine, field.name), getattr(theirs, field.name)
        if a != b:
            return f"{field.name}: {a!r} here, {b!r} there"
    return ""


def _rows(block_ids: list[int], block_size: int, device: torch.device) -> torch.Tensor:
    blocks = torch.tensor(block_ids, dtype=torch.int64, device=device)
    return (blocks[:, None] * block_size + torch.arange(block_size, device=device)).flatten()


def empty(layout: kv_transfer_pb2.KvLayout, num_blocks: int, device: torch.device) -> torch.Tensor:
    """Room for `num_blocks` blocks as `gather` writes them (allocated first: running out of memory then leaves
    the caller free to take another way)."""
    return torch.empty(num_blocks, layout.num_layers, block_bytes(layout) // layout.num_layers, dtype=torch.uint8,
                       device=device)  # fmt: skip


def gather(
    caches: list[torch.Tensor], block_size: int, block_ids: list[int], out: torch.Tensor | None = None
) -> torch.Tensor:
    """The K/V of `block_ids` on the caches' device, [blocks, layers, bytes of a layer's block] (as bytes: the
    same gather for every dtype, fp8 included), into `out` when given; beyond it, one layer's worth at a time."""
    rows = _rows(block_ids, block_size, caches[0].device)
    if out is None:
        out = torch.empty(len(block_ids), len(caches), caches[0][:block_size].nbytes, dtype=torch.uint8,
                          device=caches[0].device)  # fmt: skip
    for layer, cache in enumerate(caches):
        out[:, layer] = cache.view(torch.uint8).index_select(0, rows).view(len(block_ids), -1)
    return out


def read(caches: list[torch.Tensor], block_size: int, block_ids: list[int]) -> bytes:
    """The K/V of `block_ids`, block after block, on the wire's layout."""
    return gather(caches, block_size, block_ids).cpu().numpy().tobytes()


def block_bytes(layout: kv_transfer_pb2.KvLayout) -> int:
    """Bytes of one block on the wire (all its layers)."""
    element = torch.empty((), dtype=getattr(torch, layout.dtype)).element_size()
    return layout.num_layers * layout.block_size * 2 * layout.num_kv_heads * layout.head_dim * element


def staged(chunks: list[bytes], num_blocks: int, num_layers: int) -> torch.Tensor:
    """The received bytes as [blocks, layers, bytes of a layer's block]."""
    return torch.frombuffer(bytearray(b"".join(chunks)), dtype=torch.uint8).view(num_blocks, num_layers, -1)


def land(caches: list[torch.Tensor], block_size: int, block_ids: list[int], pulled: Pulled) -> None:
    """Write pulled K/V into `block_ids` of this engine's cache (as bytes, fp8 included)."""
    cache0 = caches[0]
    rows = _rows(block_ids, block_size, cache0.device)
    data = pulled.data[: len(block_ids)]
    if pulled.ready is not None:  # copied on a side stream: this stream reads it once that copy is done
        stream = torch.cuda.current_stream(cache0.device)
        stream.wait_event(pulled.ready)
        data.record_stream(stream)
    for layer, cache in enumerate(caches):  # a streamed prompt moves to the device a layer at a time
        raw = cache.view(torch.uint8)
        raw.index_copy_(0, rows, data[:, layer].to(cache0.device).reshape(-1, *raw.shape[1:]))
