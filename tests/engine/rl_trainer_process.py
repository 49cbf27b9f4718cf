"""The trainer of tests/engine/test_rl_control.py: one process that serves a gloo group as rank 0 and broadcasts
weights to the engine, job after job, one tensor at a time or packed, by vLLM 0.33's own packer (its wheel's
packed_tensor.py, which needs only torch) or by examples/rl_trainer.py's.

Forked once, before this process has run gloo (the engine's side, or tests/gateway's trainer): a process forked
after gloo ran inherits gloo's transport state without the threads that serve it, and its group hangs. So the test
module forks it at import, during collection, before any test runs. Forked (not spawned) so it starts at once (a
spawned one spends ~20 s importing torch on a busy CI machine); it leaves by os._exit, without the parent's exit
hooks, when told to or when the parent is gone.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import multiprocessing
import os
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from examples import rl_trainer

# vLLM 0.33's packer, read from the vLLM make setup installs (without its pins), not imported through vllm
VLLM_PACKER = (
    Path(str(importlib.metadata.distribution("vllm").locate_file("vllm")))
    / "distributed/weight_transfer/packed_tensor.py"
)


class _Stream:  # a CUDA stream's stand-in: on CPU a broadcast is done when it returns
    def synchronize(self) -> None:
        pass


class _Group:  # vLLM's PyNcclCommunicator, as far as its packer uses it
    @staticmethod
    def broadcast(tensor: torch.Tensor, src: int) -> None:
        dist.broadcast(tensor, src=src)


def _vllm_packer():
    """vLLM's packed_nccl_broadcast_producer with its CUDA streams stubbed out (this process only)."""
    spec = importlib.util.spec_from_file_location("vllm_packed_tensor", VLLM_PACKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._get_streams = lambda device, count: tuple(_Stream() for _ in range(count))
    torch.cuda.stream = lambda stream: contextlib.nullcontext()
    torch.accelerator.current_device_index = lambda: 0

    def send(state: dict[str, torch.Tensor], packed_bytes: int) -> None:
        module.packed_nccl_broadcast_producer(
            iter(state.items()), _Group(), 0, lambda item: item[1], buffer_size_bytes=packed_bytes
        )

    return send


def _next(jobs):
    try:
        return jobs.recv()
    except EOFError:  # the parent is gone
        return None


def _serve(jobs, parents) -> None:
    parents.close()  # so that the parent's exit ends the pipe here
    while (job := _next(jobs)) is not None:
        port, state, rounds, packed_bytes, packer = job
        try:
            send = _vllm_packer() if packer == "vllm" else rl_trainer.broadcast
            rl_trainer.join_group("127.0.0.1", port, 2)
            for _ in range(rounds):
                send(state, packed_bytes)
            dist.destroy_process_group()
            jobs.send(None)
        except BaseException:  # the test's answer
            jobs.send(traceback.format_exc())
    os._exit(0)


class Trainer:
    def __init__(self):
        self.jobs, theirs = multiprocessing.Pipe()
        # daemonic: a session that collects this module without running its tests (`-m "not slow"`, another
        # xdist worker) never closes it, and its exit ends a daemon where it would wait on any other child
        self.process = multiprocessing.get_context("fork").Process(target=_serve, args=(theirs, self.jobs), daemon=True)
        self.process.start()
        theirs.close()

    def start(self, state: dict[str, torch.Tensor], rounds: int = 1, packed_bytes: int = 0, packer: str = "ours"):
        """Serve a group at a free port (returned) and send `state` `rounds` times once the engine joins."""
        port = rl_trainer.free_port()
        self.jobs.send((port, state, rounds, packed_bytes, packer))
        return port

    def done(self, timeout_s: float = 60) -> None:
        assert self.jobs.poll(timeout_s), "the trainer did not finish"
        failure = self.jobs.recv()
        assert failure is None, failure

    def close(self) -> None:
        self.jobs.send(None)
        self.process.join(30)
