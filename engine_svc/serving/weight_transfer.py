"""A trainer's weights, received: the backends of EngineControlService's weight transfer (--weight-transfer-backend).

- nccl: torch.distributed. InitWeightTransfer joins the trainer's group (a TCP store the trainer serves at
  master_address:master_port; the trainer is rank 0) over NCCL on CUDA and gloo on CPU, so CI runs the same code;
  UpdateWeights receives each named tensor by a broadcast from rank 0, in the order named, or, packed (vLLM's
  packed broadcast), the tensors' bytes back to back in flat uint8 buffers, one broadcast each: a buffer takes the
  next tensors in order until it holds more than packed_buffer_size_bytes (the tensor that crosses the line
  included; no alignment), the last one what is left (vLLM's packed_tensor.packed_nccl_broadcast_consumer). An
  update naming no tensors sends the previous update's again (vLLM's). The group is the
  process's default one: the engine uses torch.distributed for nothing else. (vLLM's trainer helpers rendezvous
  their own way, PyNccl over a StatelessProcessGroup: a trainer joins with torch.distributed, as
  examples/rl_trainer.py does; the HTTP calls are vLLM's.)
- disk: every tensor of a folder's *.safetensors files (the safetensors library, read straight onto the device).
- ipc: CUDA IPC handles from a trainer on the same GPU, one {GPU UUID: torch rebuild_cuda_tensor args} per tensor,
  pickled (vLLM's ipc backend's handles). Unpickling runs the trainer's bytes: ipc is opt-in by flag.
Every tensor is checked against the model (weights.check) before any is written.
"""

from __future__ import annotations

import math
import pickle
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from engine_svc.model import weights
from scaleout.v1 import control_pb2
from scaleout_common.errors import quote
from scaleout_common.reasons import Reason, fail

BACKENDS = ("nccl", "disk", "ipc")
RENDEZVOUS_TIMEOUT_S = 300  # a trainer may load its model between the engine's init call and its own
PACKED_BUFFER_BYTES = 1 << 30  # vLLM's DEFAULT_PACKED_BUFFER_SIZE_BYTES


def add_flags(parser) -> None:
    parser.add_argument(
        "--weight-transfer-backend",
        default="nccl",
        choices=BACKENDS,
        help="how UpdateWeights receives a trainer's weights: nccl (torch.distributed: NCCL on CUDA, gloo on CPU), "
        "disk (a safetensors folder) or ipc (CUDA IPC handles; unpickles the trainer's bytes). docs/rl.md",
    )


class WeightTransfer:
    """One engine's transfer state (on the step thread): the backend, and whether its group is joined."""

    def __init__(self, backend: str, device: torch.device):
        self.backend, self.device = backend, device
        self.joined = False
        self.packed_bytes = 0  # packed broadcasts of about this many bytes each; 0: one broadcast per tensor
        self.last: tuple[list[str], list[str], list[list[int]]] | None = None  # the previous update's tensors

    def init(self, request: control_pb2.InitWeightTransferRequest) -> str:
        """Join the trainer (nccl); the backend's name as InitWeightTransferResponse has it."""
        rendezvous = bool(request.master_address or request.master_port or request.world_size or request.packed)
        if self.backend != "nccl":
            if rendezvous:
                raise fail(
                    Reason.WEIGHT_TRANSFER_UNAVAILABLE,
                    f"backend {self.backend} takes no rendezvous and no packed buffers",
                    "init_info",
                )
            if self.backend == "ipc" and self.device.type != "cuda":
                raise fail(Reason.WEIGHT_TRANSFER_UNAVAILABLE, "the ipc backend needs a CUDA engine")
            self.joined = True
            return self.backend
        if not request.master_address or not 0 < request.master_port < 65536:
            raise fail(Reason.INVALID_REQUEST, "nccl needs master_address and master_port", "init_info")
        if not 0 < request.rank < request.world_size:
            raise fail(Reason.INVALID_REQUEST, f"rank {request.rank} is not in 1..world_size-1", "init_info")
        if dist.is_initialized():  # a trainer that starts over: its new group replaces the old
            dist.destroy_process_group()
            self.joined = False
        size = request.packed_buffer_size_bytes if request.HasField("packed_buffer_size_bytes") else PACKED_BUFFER_BYTES
        if size <= 0:
            raise fail(Reason.INVALID_REQUEST, f"packed_buffer_size_bytes {size} is not positive", "init_info")
        self.packed_bytes, self.last = size if request.packed else 0, None
        group = "nccl" if self.device.type == "cuda" else "gloo"
        try:
            store = dist.TCPStore(  # pyright: ignore[reportPrivateImportUsage]
                request.master_address,
                request.master_port,
                request.world_size,
                is_master=False,
                timeout=timedelta(seconds=RENDEZVOUS_TIMEOUT_S),
            )
            dist.init_process_group(group, store=store, rank=request.rank, world_size=request.world_size)
        except (RuntimeError, ValueError) as error:
            raise fail(Reason.WEIGHT_TRANSFER_FAILED, f"joining the trainer's group failed: {error}") from None
        self.joined = True
        return f"nccl ({group})"

    def receive(self, targets: dict[str, torch.Tensor], request: control_pb2.UpdateWeightsRequest) -> int:
        """The tensors the request names (or its folder holds), loaded into `targets`; how many."""
        if not self.joined:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "UpdateWeights before InitWeightTransfer")
        if self.backend == "disk":
            return self._from_disk(targets, request.path)
        if request.path:
            raise fail(Reason.WEIGHT_TRANSFER_UNAVAILABLE, f"backend {self.backend} reads no folder", "path")
        names, dtype_names, shapes = list(request.names), list(request.dtypes), [list(s.dims) for s in request.shapes]
        if not (len(names) == len(dtype_names) == len(shapes)):
            raise fail(Reason.INVALID_REQUEST, "names, dtype_names and shapes differ in length", "names")
        if self.backend == "nccl" and not names and self.last is not None:
            names, dtype_names, shapes = self.last
        dtypes = [_dtype(name) for name in dtype_names]
        weights.check(targets, names, shapes)
        if self.backend == "ipc":
            return weights.load(targets, zip(names, self._from_ipc(request.ipc_handles_pickled, len(names))))
        self.last = names, dtype_names, shapes
        if self.packed_bytes:
            return weights.load(targets, self._packed(names, shapes, dtypes))
        return weights.load(targets, ((n, self._broadcast(s, d)) for n, s, d in zip(names, shapes, dtypes)))

    def _broadcast(self, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
        tensor = torch.empty(shape, dtype=dtype, device=self.device)
        try:
            dist.broadcast(tensor, src=0)
        except RuntimeError as error:
            raise fail(Reason.WEIGHT_TRANSFER_FAILED, f"the trainer's broadcast failed: {error}") from None
        return tensor

    def _packed(self, names: list[str], shapes: list[list[int]], dtypes: list[torch.dtype]):
        """(name, tensor) received in packed buffers, cut where the trainer's packer cuts them."""
        chunk: list[tuple[str, list[int], torch.dtype, int]] = []
        total = 0
        for name, shape, dtype in zip(names, shapes, dtypes):
            chunk.append((name, shape, dtype, math.prod(shape) * dtype.itemsize))
            total += chunk[-1][3]
            if total > self.packed_bytes:
                yield from self._unpack(chunk, total)
                chunk, total = [], 0
        if chunk:
            yield from self._unpack(chunk, total)

    def _unpack(self, chunk: list[tuple[str, list[int], torch.dtype, int]], total: int):
        buffer = self._broadcast([total], torch.uint8)
        for (name, shape, dtype, _), part in zip(chunk, buffer.split([size for *_, size in chunk])):
            if part.storage_offset() % dtype.itemsize:  # after a tensor of an odd byte count: aligned by a copy
                part = part.clone()
            yield name, part.view(dtype).view(shape)

    def _from_disk(self, targets: dict[str, torch.Tensor], path: str) -> int:
        from safetensors import safe_open

        files = sorted(Path(path).glob("*.safetensors")) if path else []
        if not files:
            raise fail(Reason.INVALID_WEIGHTS, f"no *.safetensors files in {quote(path)}", "path")
        opened = [safe_open(str(f), framework="pt", device=str(self.device)) for f in files]
        listed = [(f, list(f.keys())) for f in opened]
        for f, keys in listed:
            weights.check(targets, keys, [f.get_slice(k).get_shape() for k in keys])
        return weights.load(targets, ((k, f.get_tensor(k)) for f, keys in listed for k in keys))

    def _from_ipc(self, pickled: bytes, count: int) -> list[torch.Tensor]:  # untested: needs CUDA (bench/engine)
        from torch.multiprocessing.reductions import rebuild_cuda_tensor

        handles = pickle.loads(pickled)
        if not isinstance(handles, list) or len(handles) != count:
            raise fail(Reason.INVALID_REQUEST, "ipc_handles must hold one handle per name", "ipc_handles")
        index = self.device.index or 0
        uuid = str(torch.cuda.get_device_properties(index).uuid)
        tensors = []
        for handle in handles:
            if uuid not in handle:
                raise fail(Reason.INVALID_REQUEST, f"no IPC handle for this engine's GPU {uuid}", "ipc_handles")
            args = list(handle[uuid])
            args[6] = index  # the device index in rebuild_cuda_tensor's args: this process's numbering
            tensors.append(rebuild_cuda_tensor(*args))
        return tensors

    def close(self) -> None:
        if self.joined and dist.is_initialized():
            dist.destroy_process_group()
        self.joined = False


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise fail(Reason.INVALID_REQUEST, f"{quote(name)} is not a torch floating-point dtype", "dtype_names")
    return dtype
