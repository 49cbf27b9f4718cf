"""NCCL's C API, the five calls a weight broadcast needs, through ctypes (as vLLM's pynccl_wrapper reaches it).

torch.cuda.nccl would be the library to use, but its init_rank fails on Python 3.12 (`SystemError: PY_SSIZE_T_CLEAN
macro must be defined for '#' formats`, torch 2.11), and torch.distributed cannot join a communicator from a unique id
minted elsewhere. The library is the libnccl.so.2 torch's CUDA build has loaded already (or NCCL_LIBRARY).
Tensors go with NCCL's type of their dtype (vLLM's ncclDataTypeEnum), so every rank names the same type and count.
"""

from __future__ import annotations

import ctypes
import os

import torch

UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES
SUM = 0  # ncclSum
TYPES = {  # torch dtype -> ncclDataType_t
    torch.int8: 0,
    torch.uint8: 1,
    torch.int32: 2,
    torch.int64: 4,
    torch.float16: 6,
    torch.float32: 7,
    torch.float64: 8,
    torch.bfloat16: 9,
    torch.float8_e4m3fn: 10,
}


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * UNIQUE_ID_BYTES)]


class NcclError(RuntimeError):
    """An NCCL call failed; the message is NCCL's."""


_library: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    global _library
    if _library is None:
        nccl = ctypes.CDLL(os.environ.get("NCCL_LIBRARY", "libnccl.so.2"))
        nccl.ncclGetErrorString.restype = ctypes.c_char_p
        nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
        for name in ("ncclAllReduce", "ncclBroadcast"):
            getattr(nccl, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            getattr(nccl, name).argtypes += [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        nccl.ncclCommDestroy.argtypes = [ctypes.c_void_p]
        _library = nccl
    return _library


def _type(dtype: torch.dtype) -> int:
    if dtype not in TYPES:
        raise NcclError(f"NCCL carries no {dtype}")
    return TYPES[dtype]


def _check(result: int) -> None:
    if result:
        raise NcclError(f"NCCL error {result}: {library().ncclGetErrorString(result).decode()}")


def unique_id() -> bytes:
    uid = UniqueId()
    _check(library().ncclGetUniqueId(ctypes.byref(uid)))
    return bytes(uid.internal)


class Communicator:
    """One rank of an NCCL communicator on `device` (ncclCommInitRank blocks until every rank has joined)."""

    def __init__(self, uid: bytes, rank: int, world_size: int, device: torch.device):
        self.device, self.comm = device, ctypes.c_void_p()
        raw = UniqueId()
        ctypes.memmove(raw.internal, uid, UNIQUE_ID_BYTES)
        with torch.cuda.device(device):
            _check(library().ncclCommInitRank(ctypes.byref(self.comm), world_size, raw, rank))

    def _stream(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(torch.cuda.current_stream(self.device).cuda_stream)

    def all_reduce_sum(self, tensor: torch.Tensor) -> None:
        """In place, on the current stream."""
        pointer, count = ctypes.c_void_p(tensor.data_ptr()), tensor.numel()
        _check(library().ncclAllReduce(pointer, pointer, count, _type(tensor.dtype), SUM, self.comm, self._stream()))

    def broadcast(self, tensor: torch.Tensor, root: int = 0) -> None:
        """`tensor` (contiguous) from rank `root` into every rank's, on the current stream."""
        pointer, count = ctypes.c_void_p(tensor.data_ptr()), tensor.numel()
        _check(library().ncclBroadcast(pointer, pointer, count, _type(tensor.dtype), root, self.comm, self._stream()))

    def close(self) -> None:
        if self.comm:
            library().ncclCommDestroy(self.comm)
            self.comm = ctypes.c_void_p()
