"""Which way a handoff's KV blocks travel, and the device path's parts.

The one rule (`choose`): CUDA IPC when both engines keep their caches on CUDA, on the same GPU (device UUID) of
the same host (kernel boot id), in different processes (CUDA maps another process's memory only); the gRPC
stream (PullKvBlocks' bytes through host memory) otherwise. Both ends apply it: the prefill engine hands out IPC
handles only when it says so, and the decode engine maps them only then (and streams when mapping fails).

The device path shares each layer's cache tensor as torch.multiprocessing does (reduce_tensor on the prefill
side, rebuild_cuda_tensor here), field by field in our contract (CudaIpcTensor): no pickles cross the wire.
"""

from __future__ import annotations

import socket
import uuid
from functools import cache
from pathlib import Path
from typing import Any, cast

import torch
from torch.multiprocessing.reductions import rebuild_cuda_tensor, reduce_tensor

from scaleout.v1 import kv_transfer_pb2

STREAM, CUDA_IPC = "grpc_stream", "cuda_ipc"
PROCESS_ID = uuid.uuid4().hex  # pids repeat across containers of one host: this does not


@cache
def host_id() -> str:
    """The kernel's boot id: the same for every container of one host, unlike their names."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return socket.gethostname()


def device_of(device: torch.device) -> kv_transfer_pb2.KvDevice:
    gpu = str(torch.cuda.get_device_properties(device).uuid) if device.type == "cuda" else ""
    return kv_transfer_pb2.KvDevice(host_id=host_id(), device_uuid=gpu, process_id=PROCESS_ID)


def choose(mine: kv_transfer_pb2.KvDevice, theirs: kv_transfer_pb2.KvDevice) -> str:
    """The transport between two engines' caches: the one rule."""
    same_gpu = bool(mine.device_uuid) and (mine.host_id, mine.device_uuid) == (theirs.host_id, theirs.device_uuid)
    return CUDA_IPC if same_gpu and mine.process_id != theirs.process_id else STREAM


def share(caches: list[torch.Tensor]) -> list[kv_transfer_pb2.CudaIpcTensor]:
    """The prefill side: each layer's cache as another process on this GPU maps it."""
    out = []
    for tensor in caches:
        # rebuild_cuda_tensor's arguments (torch.multiprocessing.reductions); the stubs type them as any rebuild's
        args = cast("tuple[Any, ...]", reduce_tensor(tensor)[1])
        (_, shape, stride, offset, _, _, _, handle, size, storage_offset, _, counter, counter_offset, event, sync) = (
            args
        )
        out.append(
            kv_transfer_pb2.CudaIpcTensor(
                handle=handle,
                storage_size_bytes=size,
                storage_offset_bytes=storage_offset,
                ref_counter_handle=counter,
                ref_counter_offset=counter_offset,
                event_sync_required=sync,
                shape=list(shape),
                stride=list(stride),
                offset=offset,
            )
        )
        if event is not None:
            out[-1].event_handle = event
    return out


def open_shared(
    layers: list[kv_transfer_pb2.CudaIpcTensor], layout: kv_transfer_pb2.KvLayout, device: torch.device
) -> list[torch.Tensor]:
    """The decode side: the prefill engine's layer caches mapped into this process (ValueError when their shapes
    are not the layout's; the CUDA driver's error when the memory cannot be mapped)."""
    if len(layers) != layout.num_layers:
        raise ValueError(f"{len(layers)} shared layer caches, not {layout.num_layers}")
    for layer in layers:
        rows = (layer.shape or [0])[0]
        if list(layer.shape[1:]) != [2, layout.num_kv_heads, layout.head_dim] or rows % layout.block_size:
            raise ValueError(f"a shared layer cache of shape {list(layer.shape)} does not hold this layout's blocks")
    dtype, index = getattr(torch, layout.dtype), device.index
    index = torch.cuda.current_device() if index is None else index
    mapped = []
    for layer in layers:
        event = layer.event_handle if layer.HasField("event_handle") else None
        mapped.append(
            rebuild_cuda_tensor(
                torch.Tensor,
                torch.Size(layer.shape),
                tuple(layer.stride),
                layer.offset,
                torch.UntypedStorage,
                dtype,
                index,
                layer.handle,
                layer.storage_size_bytes,
                layer.storage_offset_bytes,
                False,
                layer.ref_counter_handle,
                layer.ref_counter_offset,
                event,
                layer.event_sync_required,
            )
        )
    return mapped
