"""The engine's side of vLLM's trainer rendezvous (engine_svc/serving/trainer_group.py): vLLM 0.33's own
StatelessProcessGroup (in a subprocess) serves the store as a trainer's rank 0 does and broadcasts a ctypes
ncclUniqueId exactly as PyNcclCommunicator does; the engine reads the same 128 bytes, and unpickles nothing else.
The NCCL communicator itself needs CUDA (tests/engine/test_trainer_group_cuda.py)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from datetime import timedelta

import pytest
import torch.distributed as dist

from devstack.stack import free_port
from engine_svc.serving import trainer_group

VLLM_PYTHON = sys.executable  # make setup installs vLLM 0.33 (without its pins) beside us
UID = bytes((7 * i + 3) % 256 for i in range(128))
# vLLM's trainer side as PyNcclCommunicator.__init__ runs it on rank 0, with a known id instead of ncclGetUniqueId's.
TRAINER = """
import sys
from datetime import timedelta
from vllm.distributed.device_communicators.pynccl_wrapper import ncclUniqueId
from vllm.distributed.utils import StatelessProcessGroup
group = StatelessProcessGroup.create(host="127.0.0.1", port=int(sys.argv[1]), rank=0, world_size=2)
uid = ncclUniqueId()
for i, byte in enumerate(bytes.fromhex(sys.argv[2])):
    uid.internal[i] = byte - 256 if byte > 127 else byte
group.broadcast_obj(uid, src=0)
group.store.wait(["engine-read"], timedelta(seconds=60))
print("done", flush=True)
"""


def test_the_unique_id_vllms_trainer_broadcasts_is_read():
    port = free_port()
    trainer = subprocess.Popen([VLLM_PYTHON, "-c", TRAINER, str(port), UID.hex()], stdout=subprocess.PIPE, text=True)
    try:
        client = trainer_group.store("127.0.0.1", port, 2)
        assert trainer_group.unique_id(client) == UID
        client.set("engine-read", "1")
        out, _ = trainer.communicate(timeout=60)
        assert out.strip() == "done"
    finally:
        trainer.kill()


def _served(value: bytes) -> object:
    """A store holding `value` under vLLM's first-broadcast key, this process its server."""
    port = free_port()
    server = dist.TCPStore("127.0.0.1", port, 1, is_master=True, timeout=timedelta(seconds=10))  # pyright: ignore[reportPrivateImportUsage]
    server.set(trainer_group.UNIQUE_ID_KEY, value)  # pyright: ignore[reportArgumentType]: bytes are taken
    return server


def test_plain_bytes_are_an_id_too():
    assert trainer_group.unique_id(_served(pickle.dumps(UID))) == UID


class Evil:
    def __reduce__(self):
        return (print, ("ran",))


@pytest.mark.parametrize(
    "value",
    [pickle.dumps(Evil()), pickle.dumps(UID[:16]), pickle.dumps([UID]), b"not a pickle"],
    ids=["a callable", "short", "a list", "garbage"],
)
def test_anything_else_is_refused_unrun(value, capsys):
    with pytest.raises(trainer_group.GroupError):
        trainer_group.unique_id(_served(value))
    assert "ran" not in capsys.readouterr().out
