"""A trainer's side of scaleout's RL control plane: push new weights into the serving engines, each way.

The HTTP calls are vLLM's RL API (its serve/dev and rl/online routers), sent to the gateway, which applies each to
every engine replica (docs/rl.md). Two ways to move the weights:

- nccl: the trainer serves a group (a TCP store at --master-address:--master-port, rank 0) that every engine
  replica joins (`/init_weight_transfer_engine`); `/update_weights` names the tensors and the trainer broadcasts
  them in that order, one by one or packed (vLLM's packed broadcast: `--packed-bytes`). Between GPUs the group is
  vLLM's (its ncclUniqueId in the store, one NCCL communicator: vLLM's own NCCLTrainerWeightTransferEngine joins
  the same way), on CPU torch.distributed's gloo.
- disk: the trainer writes a safetensors folder the engines can read; `/update_weights {"update_info": {"path"}}`.

    python examples/rl_trainer.py --url http://127.0.0.1:8080 --model DIR --way nccl --version step-1

Each update: pause (keep: in-flight requests freeze and resume under the new weights), start, update, finish
(naming the new version), resume. Needs torch, safetensors, transformers (for --model) and requests.
"""

from __future__ import annotations

import argparse
import pickle
import socket
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import cast

import requests
import torch
import torch.distributed as dist

TIMEOUT_S = 600  # a broadcast of a large model's weights takes a while
Send = Callable[[torch.Tensor], None]  # one broadcast from rank 0


class Engines:
    """The gateway's RL routes (vLLM's paths and bodies)."""

    def __init__(self, url: str, api_key: str = ""):
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def call(self, method: str, path: str, body: dict | None = None, **params) -> dict:
        reply = requests.request(
            method, self.url + path, json=body, params=params, headers=self.headers, timeout=TIMEOUT_S
        )
        reply.raise_for_status()
        return reply.json()

    def world_size(self) -> int:
        return self.call("GET", "/get_world_size")["world_size"]


def specs(state: dict[str, torch.Tensor]) -> dict:
    """`update_info` naming the tensors of `state` in the order they are broadcast."""
    return {
        "names": list(state),
        "dtype_names": [str(t.dtype).removeprefix("torch.") for t in state.values()],
        "shapes": [list(t.shape) for t in state.values()],
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def gloo_send(tensor: torch.Tensor) -> None:
    dist.broadcast(tensor, src=0)


def join_group(master_address: str, master_port: int, world_size: int, backend: str = "gloo") -> Send:
    """Serve the group's TCP store as rank 0 and join (blocks until every engine has joined too); its broadcast."""
    store = dist.TCPStore(master_address, master_port, world_size, is_master=True)  # pyright: ignore[reportPrivateImportUsage]
    if backend != "nccl":
        dist.init_process_group(backend, store=store, rank=0, world_size=world_size)
        return gloo_send
    # vLLM's rendezvous (PyNcclCommunicator over its StatelessProcessGroup): the id as the store's first broadcast
    # (vLLM pickles its ctypes ncclUniqueId; the engines read plain bytes too), then vLLM's warm-up all_reduce.
    from scaleout_common import nccl

    uid = nccl.unique_id()
    store.set("broadcast_from/0/0", pickle.dumps(uid))  # pyright: ignore[reportArgumentType]: bytes are taken
    communicator = nccl.Communicator(uid, 0, world_size, torch.device("cuda", torch.cuda.current_device()))
    communicator.all_reduce_sum(torch.zeros(1, device="cuda"))
    return communicator.broadcast


def join_sglang_group(master_address: str, master_port: int, world_size: int, name: str, backend: str = "gloo") -> Send:
    """Rank 0 of SGLang's weight-update group (`/init_weights_update_group`), as SGLang's and slime's
    init_custom_process_group build it: torch's tcp:// store, the group's keys under its name, a group of its own
    (no default group); its broadcast (one a tensor, in the order `/update_weights_from_distributed` names them)."""
    from torch.distributed import distributed_c10d as c10d

    timeout = timedelta(seconds=TIMEOUT_S)
    meeting = c10d.rendezvous(f"tcp://{master_address}:{master_port}", 0, world_size, timeout=timeout)  # pyright: ignore[reportPrivateImportUsage]
    store, rank, size = next(meeting)
    store.set_timeout(timeout)
    group, _ = c10d._new_process_group_helper(
        size,
        rank,
        [],
        c10d.Backend(backend),
        c10d.PrefixStore(name, store),
        group_name=cast(c10d.GroupName, name),
        timeout=timeout,
    )
    c10d._world.pg_group_ranks[group] = {i: i for i in range(size)}  # the group's ranks are the global ones
    mine = cast(dist.ProcessGroup, group)

    def send(tensor: torch.Tensor) -> None:
        dist.broadcast(tensor, src=0, group=mine)

    return send


def broadcast(state: dict[str, torch.Tensor], packed_bytes: int = 0, send: Send = gloo_send) -> None:
    """Each tensor in turn, or (packed_bytes > 0) vLLM's packed broadcast (packed_tensor.py's
    packed_nccl_broadcast_producer): the tensors' bytes back to back in one flat uint8 buffer per broadcast, a
    buffer sent once it holds more than packed_bytes (the tensor that crosses the line included)."""
    if not packed_bytes:
        for tensor in state.values():
            send(tensor.contiguous())
        return
    parts, size = [], 0
    for tensor in state.values():
        parts.append(tensor.contiguous().view(-1).view(torch.uint8))
        size += parts[-1].numel()
        if size > packed_bytes:
            send(torch.cat(parts))
            parts, size = [], 0
    if parts:
        send(torch.cat(parts))


def in_background(call, *args) -> threading.Thread:
    """`call` in a thread: an engine's answer comes only once the trainer has done its side."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            call(*args)
        except BaseException as error:  # handed to the joiner
            failed.append(error)

    thread = threading.Thread(target=run)
    thread.failed = failed  # type: ignore[attr-defined]
    thread.start()
    return thread


def finish(thread: threading.Thread) -> None:
    thread.join()
    if thread.failed:  # type: ignore[attr-defined]
        raise thread.failed[0]  # type: ignore[attr-defined]


def init_nccl(
    engines: Engines, master_address: str, master_port: int, backend: str = "gloo", packed_bytes: int = 0
) -> Send:
    """Every engine joins the trainer's group (rank_offset 1: the trainer is rank 0); packed_bytes > 0: the
    updates are packed broadcasts of that buffer size (init_info's packed fields, as vLLM's trainer sends them)."""
    world_size = engines.world_size() + 1
    init_info = {"master_address": master_address, "master_port": master_port, "rank_offset": 1}
    init_info["world_size"] = world_size
    if packed_bytes:
        init_info.update(packed=True, packed_buffer_size_bytes=packed_bytes)
    call = in_background(engines.call, "POST", "/init_weight_transfer_engine", {"init_info": init_info})
    send = join_group(master_address, master_port, world_size, backend)
    finish(call)
    return send


def update_over_nccl(
    engines: Engines, state: dict[str, torch.Tensor], version: str, packed_bytes: int = 0, send: Send = gloo_send
) -> None:
    """One update; packed_bytes as given to init_nccl, send as it returned."""
    engines.call("POST", "/pause", mode="keep")
    engines.call("POST", "/start_weight_update")
    call = in_background(engines.call, "POST", "/update_weights", {"update_info": specs(state)})
    broadcast(state, packed_bytes, send)
    finish(call)
    engines.call("POST", "/finish_weight_update", {"weight_version": version})
    engines.call("POST", "/resume")


def update_from_disk(engines: Engines, state: dict[str, torch.Tensor], folder: Path, version: str) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "model.safetensors"))
    engines.call("POST", "/init_weight_transfer_engine", {"init_info": {}})
    engines.call("POST", "/pause", mode="keep")
    engines.call("POST", "/start_weight_update")
    engines.call("POST", "/update_weights", {"update_info": {"path": str(folder)}})
    engines.call("POST", "/finish_weight_update", {"weight_version": version})
    engines.call("POST", "/resume")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--api-key", default="", help="an admin key when the gateway runs with --api-keys")
    parser.add_argument("--model", required=True, help="the trainer's model: a Hugging Face folder")
    parser.add_argument("--way", choices=["nccl", "disk"], default="nccl")
    parser.add_argument("--version", default="step-1")
    parser.add_argument("--packed-bytes", type=int, default=0, help="nccl: packed broadcasts of this size (0: off)")
    parser.add_argument("--master-address", default="127.0.0.1", help="where the engines reach this trainer")
    parser.add_argument("--folder", default="/tmp/rl-weights", help="disk: a folder the engines can read")
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(args.model)
    state = dict(model.named_parameters())
    engines = Engines(args.url, args.api_key)
    if args.way == "nccl":
        group = "nccl" if torch.cuda.is_available() else "gloo"
        state = {k: v.detach().to("cuda" if group == "nccl" else "cpu") for k, v in state.items()}
        send = init_nccl(engines, args.master_address, free_port(), group, args.packed_bytes)
        update_over_nccl(engines, state, args.version, args.packed_bytes, send)
    else:
        update_from_disk(engines, {k: v.detach() for k, v in state.items()}, Path(args.folder), args.version)
    print(engines.call("GET", "/weight_info"))


if __name__ == "__main__":
    main()
