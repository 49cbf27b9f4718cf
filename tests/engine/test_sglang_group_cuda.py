"""SGLang's weight-update group on CUDA: a trainer process joining as SGLang's and slime's trainers do
(init_custom_process_group over torch's tcp:// store, the keys under the group's name, NCCL; examples/rl_trainer.py's
join_sglang_group) and the engine's WeightTransfer joining it as rank 1 by group name (trainer_group.NamedGroup),
then one broadcast a tensor, as `/update_weights_from_distributed` names them. NCCL takes one rank per GPU: the
test needs two (tests/gateway/test_sglang_rl_routes.py runs the same group over gloo on CPU)."""

from __future__ import annotations

import multiprocessing

import pytest
import torch

from engine_svc.serving.weight_transfer import WeightTransfer
from examples import rl_trainer
from scaleout.v1 import control_pb2 as C

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
SHAPES = {"a": [64, 33], "b": [7], "c": [128, 128]}
GROUP = "slime-pp_0"


def _trainer(port: int, state: dict[str, torch.Tensor], answers) -> None:
    try:
        torch.cuda.set_device(1)
        send = rl_trainer.join_sglang_group("127.0.0.1", port, 2, GROUP, backend="nccl")
        for tensor in state.values():
            send(tensor.to("cuda:1"))
        torch.cuda.synchronize()
        answers.put(None)
    except Exception as error:  # the test's answer
        answers.put(repr(error))


def test_an_sglang_trainer_updates_the_weights_over_nccl():
    state = {k: torch.randn(s, dtype=torch.bfloat16) for k, s in SHAPES.items()}
    targets = {k: torch.zeros(s, dtype=torch.bfloat16, device="cuda:0") for k, s in SHAPES.items()}
    port = rl_trainer.free_port()
    context = multiprocessing.get_context("spawn")
    answers = context.Queue()
    trainer = context.Process(target=_trainer, args=(port, state, answers))
    trainer.start()
    transfer = WeightTransfer("nccl", torch.device("cuda:0"))
    init = C.InitWeightTransferRequest(master_address="127.0.0.1", master_port=port, rank=1, world_size=2)
    init.group_name, init.group_backend = GROUP, "nccl"
    try:
        assert transfer.init(init) == "nccl (nccl)"
        assert transfer.group_name == GROUP
        update = C.UpdateWeightsRequest(names=list(SHAPES), dtypes=["bfloat16"] * 3)
        update.shapes.extend(C.TensorShape(dims=s) for s in SHAPES.values())
        assert transfer.receive(targets, update) == 3
        assert answers.get(timeout=120) is None
        for name, tensor in state.items():
            assert torch.equal(targets[name].cpu(), tensor), name
    finally:
        transfer.close()
        trainer.kill()
