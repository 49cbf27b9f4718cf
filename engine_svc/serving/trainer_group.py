"""The group a trainer broadcasts its weights over (the nccl weight-transfer backend), joined as rank > 0.

- CUDA: vLLM's trainer rendezvous, so a trainer written for vLLM (NCCLTrainerWeightTransferEngine.trainer_init, or
  a torch-free trainer's `nccl_unique_id_b64`) joins unchanged. The trainer, rank 0, serves a TCP store at
  master_address:master_port and puts its ncclUniqueId under `broadcast_from/0/0` (the first broadcast_obj of
  vLLM's StatelessProcessGroup, pickled: vLLM's ctypes ncclUniqueId or plain bytes are read, nothing else is
  unpickled). Every rank then builds one NCCL communicator (ncclCommInitRank, scaleout_common/nccl.py) and runs
  vLLM's warm-up, a one-element float32 all_reduce; the weights are NCCL broadcasts from rank 0 on the current
  stream, as PyNcclCommunicator.broadcast sends them.
- CPU: gloo through torch.distributed over the same store (there is no NCCL on CPU, and vLLM's trainer needs CUDA):
  a trainer joins with torch.distributed, as examples/rl_trainer.py's join_group does.
- SGLang's rendezvous (a group name given): torch.distributed's group over the trainer's store with its keys
  prefixed by the group's name, built as SGLang's init_custom_process_group builds it (a PrefixStore and torch's
  _new_process_group_helper, which SGLang and slime call too: no default group is needed), NCCL on CUDA, gloo on CPU.
"""

from __future__ import annotations

import io
import pickle
from datetime import timedelta
from typing import cast

import torch
import torch.distributed as dist

from scaleout_common import nccl

RENDEZVOUS_TIMEOUT_S = 300  # a trainer may load its model between the engine's init call and its own
UNIQUE_ID_KEY = "broadcast_from/0/0"  # StatelessProcessGroup.broadcast_obj's first key from rank 0
UNIQUE_ID_BYTES = nccl.UNIQUE_ID_BYTES
VLLM_UNIQUE_ID = ("vllm.distributed.device_communicators.pynccl_wrapper", "ncclUniqueId")


class GroupError(Exception):
    """The trainer's group could not be joined or used; the message says why."""


def store(address: str, port: int, world_size: int) -> dist.TCPStore:  # pyright: ignore[reportPrivateImportUsage]
    """A client of the trainer's TCP store (the trainer, rank 0, serves it)."""
    try:
        return dist.TCPStore(  # pyright: ignore[reportPrivateImportUsage]
            address, port, world_size, is_master=False, timeout=timedelta(seconds=RENDEZVOUS_TIMEOUT_S)
        )
    except (RuntimeError, ValueError) as error:
        raise GroupError(f"the trainer's store at {address}:{port} did not answer: {error}") from None


def unique_id(client) -> bytes:
    """The ncclUniqueId rank 0 broadcast through the store, as vLLM's PyNcclCommunicator broadcasts it."""
    try:
        client.wait([UNIQUE_ID_KEY], timedelta(seconds=RENDEZVOUS_TIMEOUT_S))
        raw = client.get(UNIQUE_ID_KEY)
    except RuntimeError as error:
        raise GroupError(f"the trainer put no ncclUniqueId in its store: {error}") from None
    try:
        value = _UniqueIdUnpickler(io.BytesIO(raw)).load()
    except (pickle.UnpicklingError, EOFError, TypeError, IndexError) as error:
        raise GroupError(f"the trainer's first broadcast is not an ncclUniqueId: {error}") from None
    if not isinstance(value, bytes) or len(value) != UNIQUE_ID_BYTES:
        raise GroupError(f"the trainer's first broadcast is not {UNIQUE_ID_BYTES} bytes of ncclUniqueId")
    return value


class _UniqueIdUnpickler(pickle.Unpickler):
    """Reads vLLM's pickled ctypes ncclUniqueId (`_ctypes._unpickle(ncclUniqueId, ({}, bytes))`) or plain bytes."""

    def find_class(self, module: str, name: str):
        if (module, name) == ("_ctypes", "_unpickle"):
            return lambda kind, state: state[1] if kind is _IdKind else None
        if (module, name) == VLLM_UNIQUE_ID:
            return _IdKind
        raise pickle.UnpicklingError(f"{module}.{name} is not an ncclUniqueId")


class _IdKind:
    """Stands for vLLM's ncclUniqueId class while unpickling (never instantiated)."""


class NcclGroup:
    """One NCCL communicator with the trainer, as vLLM's PyNcclCommunicator builds it."""

    def __init__(self, uid: bytes, rank: int, world_size: int, device: torch.device):
        try:
            self.communicator = nccl.Communicator(uid, rank, world_size, device)
            warm = torch.zeros(1, device=device)
            self.communicator.all_reduce_sum(warm)  # vLLM's warm-up: every rank runs it first
            torch.cuda.current_stream(device).synchronize()
        except (OSError, RuntimeError) as error:  # no libnccl; NCCL's own errors
            raise GroupError(f"ncclCommInitRank with the trainer failed: {error}") from None

    def broadcast(self, tensor: torch.Tensor) -> None:
        self.communicator.broadcast(tensor)

    def close(self) -> None:
        self.communicator.close()


class GlooGroup:
    """torch.distributed's default group over gloo (the engine uses torch.distributed for nothing else)."""

    def __init__(self, client, rank: int, world_size: int):
        if dist.is_initialized():  # a trainer that starts over: its new group replaces the old
            dist.destroy_process_group()
        try:
            dist.init_process_group("gloo", store=client, rank=rank, world_size=world_size)
        except (RuntimeError, ValueError) as error:
            raise GroupError(f"joining the trainer's gloo group failed: {error}") from None

    def broadcast(self, tensor: torch.Tensor) -> None:
        dist.broadcast(tensor, src=0)

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


class NamedGroup:
    """SGLang's weight-update group: one torch.distributed group of its own, named, beside no default group."""

    def __init__(self, client, rank: int, world_size: int, name: str, backend: str):
        from torch.distributed import distributed_c10d as c10d

        timeout = timedelta(seconds=RENDEZVOUS_TIMEOUT_S)
        try:
            group, _ = c10d._new_process_group_helper(
                world_size,
                rank,
                [],
                c10d.Backend(backend),
                c10d.PrefixStore(name, client),
                group_name=cast(c10d.GroupName, name),
                timeout=timeout,
            )
        except (RuntimeError, ValueError) as error:
            raise GroupError(f"joining the trainer's {backend} group {name!r} failed: {error}") from None
        self.group = cast(dist.ProcessGroup, group)
        c10d._world.pg_group_ranks[self.group] = {i: i for i in range(world_size)}  # group rank = global rank

    def broadcast(self, tensor: torch.Tensor) -> None:
        dist.broadcast(tensor, src=0, group=self.group)

    def close(self) -> None:
        dist.destroy_process_group(self.group)


def join(
    address: str, port: int, uid: bytes, rank: int, world_size: int, device: torch.device, name: str = ""
) -> NcclGroup | GlooGroup | NamedGroup:
    """The trainer's group: by its store at address:port (SGLang's, under `name`), or (CUDA) by a unique id."""
    if name:
        backend = "nccl" if device.type == "cuda" else "gloo"
        return NamedGroup(store(address, port, world_size), rank, world_size, name, backend)
    if device.type != "cuda":
        return GlooGroup(store(address, port, world_size), rank, world_size)
    if not uid:
        uid = unique_id(store(address, port, world_size))
    return NcclGroup(uid, rank, world_size, device)
