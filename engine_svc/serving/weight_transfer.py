"""A trainer's weights, received: the backends of EngineControlService's weight transfer (--weight-transfer-backend).

- nccl: InitWeightTransfer joins the trainer's group (trainer_group.py: vLLM's rendezvous and NCCL on CUDA, so a
  vLLM trainer joins unchanged; torch.distributed's gloo on CPU, so CI runs the rest of the same code); UpdateWeights
  receives each named tensor by a broadcast from rank 0, in the order named, or, packed (vLLM's packed
  broadcast), the tensors' bytes back to back in flat uint8 buffers, one broadcast each: a buffer takes the next
  tensors in order until it holds more than packed_buffer_size_bytes (the tensor that crosses the line included;
  no alignment), the last one what is left (vLLM's packed_tensor.packed_nccl_broadcast_consumer). An update naming
  no tensors sends the previous update's again (vLLM's).
- disk: every tensor of a folder's *.safetensors files (the safetensors library, read straight onto the device).
- ipc: CUDA IPC handles from a trainer on the same GPU, one {GPU UUID: torch rebuild_cuda_tensor args} per tensor,
  pickled (vLLM's ipc backend's handles), or, packed, one such handle of a byte buffer that holds the tensors back
  to back (`tensor_sizes`; vLLM's packed_ipc_consumer; the buffer stays mapped until the update finishes, as
  vLLM's PackedBufferImporter keeps it). Unpickling runs the trainer's bytes: ipc is opt-in by flag.
Every tensor is checked against the model (weights.check) before any is written.
"""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import torch

from engine_svc.model import weights
from engine_svc.serving import trainer_group
from scaleout.v1 import control_pb2
from scaleout_common.errors import quote
from scaleout_common.reasons import Reason, fail

BACKENDS = ("nccl", "disk", "ipc")
PACKED_BUFFER_BYTES = 1 << 30  # vLLM's DEFAULT_PACKED_BUFFER_SIZE_BYTES


def add_flags(parser) -> None:
    parser.add_argument(
        "--weight-transfer-backend",
        default="nccl",
        choices=BACKENDS,
        help="how UpdateWeights receives a trainer's weights: nccl (vLLM's NCCL rendezvous on CUDA, gloo on CPU), "
        "disk (a safetensors folder) or ipc (CUDA IPC handles; unpickles the trainer's bytes). docs/rl.md",
    )


class WeightTransfer:
    """One engine's transfer state (on the step thread): the backend, its group, whether it is joined."""

    def __init__(self, backend: str, device: torch.device):
        self.backend, self.device = backend, device
        self.joined = False
        self.group: trainer_group.NcclGroup | trainer_group.GlooGroup | trainer_group.NamedGroup | None = None
        self.group_name = ""  # SGLang's group, joined under its name
        self.packed = False  # nccl: packed broadcasts (packed_bytes each); ipc: one mapped buffer an update
        self.packed_bytes = 0
        self.last: tuple[list[str], list[str], list[list[int]]] | None = None  # the previous update's tensors
        self.mapped: tuple[tuple, torch.Tensor] | None = None  # ipc, packed: the trainer's buffer, mapped once

    def init(self, request: control_pb2.InitWeightTransferRequest) -> str:
        """Join the trainer (nccl); the backend's name as InitWeightTransferResponse has it."""
        self.close()
        rendezvous = bool(request.master_address or request.master_port or request.world_size or request.nccl_unique_id)
        if self.backend != "nccl":
            if rendezvous or request.HasField("packed_buffer_size_bytes") or (request.packed and self.backend != "ipc"):
                raise fail(
                    Reason.WEIGHT_TRANSFER_UNAVAILABLE,
                    f"backend {self.backend} takes no rendezvous"
                    + (" and no packed buffers" * (self.backend != "ipc")),
                    "init_info",
                )
            if self.backend == "ipc" and self.device.type != "cuda":
                raise fail(Reason.WEIGHT_TRANSFER_UNAVAILABLE, "the ipc backend needs a CUDA engine")
            self.packed, self.joined = request.packed, True
            return self.backend
        uid, name = request.nccl_unique_id, request.group_name
        device_backend = "nccl" if self.device.type == "cuda" else "gloo"
        if request.group_backend and (not name or request.group_backend != device_backend):
            raise fail(
                Reason.WEIGHT_TRANSFER_UNAVAILABLE,
                f"this engine's group backend is {device_backend}, with a group name",
                "group_backend",
            )
        if uid and name:
            raise fail(Reason.INVALID_REQUEST, "nccl_unique_id_b64 or a group name, not both", "group_name")
        if uid and (request.master_address or request.master_port):
            raise fail(
                Reason.INVALID_REQUEST, "nccl_unique_id_b64 or master_address/master_port, not both", "init_info"
            )
        if uid and self.device.type != "cuda":
            raise fail(Reason.WEIGHT_TRANSFER_UNAVAILABLE, "nccl_unique_id_b64 needs a CUDA engine", "init_info")
        if uid and len(uid) != trainer_group.UNIQUE_ID_BYTES:
            raise fail(Reason.INVALID_REQUEST, "nccl_unique_id_b64 must decode to 128 bytes", "init_info")
        if not uid and (not request.master_address or not 0 < request.master_port < 65536):
            raise fail(Reason.INVALID_REQUEST, "nccl needs master_address and master_port", "init_info")
        if not 0 < request.rank < request.world_size:
            raise fail(Reason.INVALID_REQUEST, f"rank {request.rank} is not in 1..world_size-1", "init_info")
        size = request.packed_buffer_size_bytes if request.HasField("packed_buffer_size_bytes") else PACKED_BUFFER_BYTES
        if size <= 0:
            raise fail(Reason.INVALID_REQUEST, f"packed_buffer_size_bytes {size} is not positive", "init_info")
        self.packed, self.packed_bytes = request.packed, size
        try:
            self.group = trainer_group.join(
                request.master_address, request.master_port, uid, request.rank, request.world_size, self.device, name
            )
        except trainer_group.GroupError as error:
            raise fail(Reason.WEIGHT_TRANSFER_FAILED, str(error)) from None
        self.joined, self.group_name = True, name
        return f"nccl ({device_backend})"

    def receive(self, targets: dict[str, torch.Tensor], request: control_pb2.UpdateWeightsRequest) -> int:
        """The tensors the request names (or its folder holds), loaded into `targets`; how many."""
        if not self.joined:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "UpdateWeights before InitWeightTransfer")
        if self.backend == "disk":
            return self._from_disk(targets, request.path)
        if request.path:
            raise fail(Reason.WEIGHT_TRANSFER_UNAVAILABLE, f"backend {self.backend} reads no folder", "path")
        if request.tensor_sizes and not (self.backend == "ipc" and self.packed):
            raise fail(Reason.INVALID_REQUEST, "tensor_sizes belong to packed ipc updates", "tensor_sizes")
        names, dtype_names, shapes = list(request.names), list(request.dtypes), [list(s.dims) for s in request.shapes]
        if not (len(names) == len(dtype_names) == len(shapes)):
            raise fail(Reason.INVALID_REQUEST, "names, dtype_names and shapes differ in length", "names")
        if self.backend == "nccl" and not names and self.last is not None:
            names, dtype_names, shapes = self.last
        dtypes = [_dtype(name) for name in dtype_names]
        weights.check(targets, names, shapes)
        if self.backend == "ipc":
            return weights.load(targets, self._from_ipc(request, names, shapes, dtypes))
        self.last = names, dtype_names, shapes
        if self.packed:
            return weights.load(targets, self._packed(names, shapes, dtypes))
        return weights.load(targets, ((n, self._broadcast(s, d)) for n, s, d in zip(names, shapes, dtypes)))

    def _broadcast(self, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
        tensor = torch.empty(shape, dtype=dtype, device=self.device)
        assert self.group is not None  # joined
        try:
            self.group.broadcast(tensor)
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

    def _from_ipc(self, request, names: list[str], shapes: list[list[int]], dtypes: list[torch.dtype]):
        """(name, tensor) mapped from the trainer's handles (bench/engine/rl_ipc.py runs this on CUDA)."""
        handles = pickle.loads(request.ipc_handles_pickled)
        if not self.packed:
            if not isinstance(handles, list) or len(handles) != len(names):
                raise fail(Reason.INVALID_REQUEST, "ipc_handles must hold one handle per name", "ipc_handles")
            return [(name, self._map(handle)) for name, handle in zip(names, handles)]
        sizes = list(request.tensor_sizes)
        if not isinstance(handles, dict):
            raise fail(Reason.INVALID_REQUEST, "packed ipc_handles must be one {GPU UUID: args} dict", "ipc_handles")
        if sizes != [math.prod(s) * d.itemsize for s, d in zip(shapes, dtypes)]:
            raise fail(Reason.INVALID_REQUEST, "tensor_sizes must be each named tensor's bytes", "tensor_sizes")
        key = tuple(handles.get(self._uuid(), ()))
        if self.mapped is None or self.mapped[0] != key:  # one mapping a buffer: torch counts one release an export
            self.mapped = key, self._map(handles)
        buffer = self.mapped[1]
        if buffer.dtype != torch.uint8 or buffer.dim() != 1 or buffer.numel() < sum(sizes):
            raise fail(
                Reason.INVALID_REQUEST, "the packed ipc buffer is not a byte buffer of the tensors", "ipc_handles"
            )
        parts = buffer[: sum(sizes)].split(sizes)
        return [(n, p.clone().view(d).view(s)) for n, p, d, s in zip(names, parts, dtypes, shapes)]

    def _uuid(self) -> str:
        return str(torch.cuda.get_device_properties(self.device.index or 0).uuid)

    def _map(self, handle) -> torch.Tensor:
        from torch.multiprocessing.reductions import rebuild_cuda_tensor

        uuid = self._uuid()
        if not isinstance(handle, dict) or uuid not in handle:
            raise fail(Reason.INVALID_REQUEST, f"no IPC handle for this engine's GPU {uuid}", "ipc_handles")
        args = list(handle[uuid])
        args[6] = self.device.index or 0  # the device index in rebuild_cuda_tensor's args: this process's numbering
        return rebuild_cuda_tensor(*args)

    def finish(self) -> None:
        """The update is over: the trainer's packed buffer is released (it may reuse or free it)."""
        self.mapped = None

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
        self.group, self.joined, self.last, self.mapped, self.group_name = None, False, None, None, ""


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise fail(Reason.INVALID_REQUEST, f"{quote(name)} is not a torch floating-point dtype", "dtype_names")
    return dtype
