"""vLLM's NCCL weight transfer on CUDA: a trainer process speaking vLLM 0.33's wire (its TCP store, the ncclUniqueId
pickled as vLLM's ctypes class under the store's first broadcast key, ncclCommInitRank as rank 0, the one-element
warm-up all_reduce, then broadcasts, packed by vLLM's rule) and the engine's WeightTransfer joining it as rank 1
(engine_svc/serving/trainer_group.py). vLLM itself is absent on the GPU machines, so its ncclUniqueId class is
rebuilt at its module path and layout; tests/engine/test_trainer_group.py reads vLLM's real pickle on CPU.
NCCL takes one rank per GPU: on a one-GPU machine the two-rank test says so and skips, and the communicator's calls
are checked with one rank."""

from __future__ import annotations

import ctypes
import multiprocessing
import pickle
import sys
import types

import pytest
import torch

from engine_svc.serving import trainer_group
from engine_svc.serving.weight_transfer import WeightTransfer
from examples import rl_trainer
from scaleout.v1 import control_pb2 as C
from scaleout_common import nccl

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
SHAPES = {"a": [64, 33], "b": [7], "c": [128, 128]}
PACKED_BYTES = 9000  # cuts the three tensors into two buffers


class ncclUniqueId(ctypes.Structure):  # vLLM's pynccl_wrapper.ncclUniqueId: pickles as vLLM's (module set below)
    _fields_ = [("internal", ctypes.c_byte * 128)]


def _as_vllms() -> None:
    name = "vllm.distributed.device_communicators.pynccl_wrapper"
    ncclUniqueId.__module__ = name
    parts = name.split(".")
    for i in range(1, len(parts) + 1):  # pickle imports the module, its parents first
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    sys.modules[name].ncclUniqueId = ncclUniqueId  # type: ignore[attr-defined]


def _trainer(port: int, device: int, state: dict[str, torch.Tensor], answers) -> None:
    """vLLM's trainer side (NCCLTrainerWeightTransferEngine.trainer_init, then send_weights packed)."""
    try:
        _as_vllms()
        torch.cuda.set_device(device)
        store = torch.distributed.TCPStore("127.0.0.1", port, 2, is_master=True, use_libuv=False)  # pyright: ignore[reportPrivateImportUsage]
        uid, raw = ncclUniqueId(), nccl.unique_id()
        ctypes.memmove(uid.internal, raw, len(raw))
        store.set("broadcast_from/0/0", pickle.dumps(uid))  # pyright: ignore[reportArgumentType]: bytes are taken
        communicator = nccl.Communicator(raw, 0, 2, torch.device("cuda", device))
        communicator.all_reduce_sum(torch.zeros(1, device=f"cuda:{device}"))
        on_device = {k: v.to(f"cuda:{device}") for k, v in state.items()}
        rl_trainer.broadcast(on_device, PACKED_BYTES, communicator.broadcast)
        torch.cuda.synchronize()
        answers.put(None)
    except Exception as error:  # the test's answer
        answers.put(repr(error))


def test_one_rank_builds_the_communicator_warms_up_and_broadcasts():
    group = trainer_group.NcclGroup(nccl.unique_id(), 0, 1, torch.device("cuda:0"))
    tensor = torch.arange(10.0, device="cuda:0")
    group.broadcast(tensor)
    assert tensor.tolist() == list(range(10))
    group.close()


def test_a_vllm_trainer_updates_the_weights_over_nccl():
    state = {k: torch.randn(s, dtype=torch.bfloat16) for k, s in SHAPES.items()}
    targets = {k: torch.zeros(s, dtype=torch.bfloat16, device="cuda:0") for k, s in SHAPES.items()}
    port = rl_trainer.free_port()
    context = multiprocessing.get_context("spawn")
    answers = context.Queue()
    trainer = context.Process(target=_trainer, args=(port, torch.cuda.device_count() - 1, state, answers))
    trainer.start()
    transfer = WeightTransfer("nccl", torch.device("cuda:0"))
    init = C.InitWeightTransferRequest(master_address="127.0.0.1", master_port=port, rank=1, world_size=2)
    init.packed, init.packed_buffer_size_bytes = True, PACKED_BYTES
    try:
        try:
            assert transfer.init(init) == "nccl (nccl)"
        except Exception as error:
            if torch.cuda.device_count() == 1:  # NCCL: "Duplicate GPU detected" (invalid usage) on both ranks
                pytest.skip(f"one GPU, and NCCL takes one rank per device: {error}; trainer: {answers.get(timeout=60)}")
            raise
        update = C.UpdateWeightsRequest(names=list(SHAPES), dtypes=["bfloat16"] * 3)
        update.shapes.extend(C.TensorShape(dims=s) for s in SHAPES.values())
        assert transfer.receive(targets, update) == 3
        assert answers.get(timeout=120) is None
        for name, tensor in state.items():
            assert torch.equal(targets[name].cpu(), tensor), name
    finally:
        transfer.close()
        trainer.kill()
