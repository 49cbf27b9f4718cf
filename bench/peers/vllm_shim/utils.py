"""What vLLM's tests import from `tests.utils`, staged as that module: the server is ours (server.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.peers.vllm_shim.server import RemoteOpenAIServer

# `vllm launch render` (the scale-out render server, no GPU): our stack serves its routes (render's) beside the rest.
RemoteLaunchRenderServer = RemoteOpenAIServer

# The staged tree's root (tests/ and the support files, examples/ among them, are copied there).
VLLM_PATH = Path(sys.modules["tests"].__file__ or ".").resolve().parent.parent
ROCM_EXTRA_ARGS: list[str] = []  # not ROCm


def multi_gpu_only(*, num_gpus: int = 2):
    return pytest.mark.skip(reason=f"needs {num_gpus} GPUs (a vLLM deployment test)")


def requires_fp8(f=None):
    mark = pytest.mark.skip(reason="needs FP8 hardware (a vLLM deployment test)")
    return mark(f) if f is not None else mark


__all__ = [
    "ROCM_EXTRA_ARGS",
    "VLLM_PATH",
    "RemoteLaunchRenderServer",
    "RemoteOpenAIServer",
    "multi_gpu_only",
    "requires_fp8",
]
