"""RL control on a GPU (issue 40's figures): a colocated trainer updates the engine's weights over CUDA IPC, with
streams frozen in keep mode; and decode speed before sleep and after wake-up. For the lead's GPU runs (the ipc
backend has not run anywhere else).

    python -m bench.engine.rl_ipc --shape llama-8b --streams 256 --out bench/engine/results/h200_rl_ipc_8b.json
    python -m bench.engine.rl_ipc ... --vllm-packer PATH/packed_tensor.py [--packed-bytes N]

With --vllm-packer (vLLM 0.33's vllm/distributed/weight_transfer/packed_tensor.py, which needs only torch) the
update is vLLM's packed IPC instead: its own packed_ipc_producer fills one --packed-bytes buffer at a time, and each
chunk is one UpdateWeights (names, sizes, the buffer's handle), as its IPCTrainerWeightTransferEngine sends them.

The engine server runs in a subprocess (--weight-transfer-backend ipc; its core in a process of its own); this
process is the trainer, on the same GPU: it holds a bf16 copy of every weight and hands the engine their IPC
handles (torch's reduce_tensor args keyed by the GPU's UUID, vLLM's ipc shape) in one UpdateWeights call.
Prints and writes: seconds from start to finish of the update (goal under 2 s for 16 GB), pause(keep)-to-resume
with --streams streams in flight, and decode tok/s before sleep (level 1) and after wake-up.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import pickle
import subprocess
import sys
import time

import grpc
import torch
from torch.multiprocessing.reductions import reduce_tensor

from bench.engine.shapes import SHAPES
from bench.serving.run import wait_serving
from engine_svc.model import weights
from scaleout.v1 import common_pb2, control_pb2, control_pb2_grpc, engine_pb2, engine_pb2_grpc

C = control_pb2


def trainer_weights(shape: str) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors of `shape`, random bf16 on this GPU (the trainer's copy)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{"vocab_size": 128256, **SHAPES[shape]})
    with torch.device("meta"):
        names = {n: (p.shape, p.dtype) for n, p in LlamaForCausalLM(config).named_parameters()}
    return {n: torch.randn(s, dtype=torch.bfloat16, device="cuda") * 0.02 for n, (s, _) in names.items()}


def ipc_update(state: dict[str, torch.Tensor]) -> C.UpdateWeightsRequest:
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    handles = [{uuid: reduce_tensor(t)[1]} for t in state.values()]
    return C.UpdateWeightsRequest(
        names=list(state),
        dtypes=["bfloat16"] * len(state),
        shapes=[C.TensorShape(dims=list(t.shape)) for t in state.values()],
        ipc_handles_pickled=pickle.dumps(handles),
    )


def packed_updates(state: dict[str, torch.Tensor], packer: str, packed_bytes: int):
    """vLLM's packed IPC chunks of `state`, each as one UpdateWeightsRequest (the next is packed after it is sent)."""
    spec = importlib.util.spec_from_file_location("vllm_packed_tensor", packer)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    chunks = module.packed_ipc_producer(iter(state.items()), uuid, lambda item: item[1], buffer_size_bytes=packed_bytes)
    for chunk in chunks:
        yield C.UpdateWeightsRequest(
            names=chunk.names,
            dtypes=chunk.dtype_names,
            shapes=[C.TensorShape(dims=s) for s in chunk.shapes],
            ipc_handles_pickled=pickle.dumps(chunk.ipc_handle),
            tensor_sizes=chunk.tensor_sizes,
        )


async def decode_rate(stub, streams: int, tokens: int) -> float:
    """Output tok/s of `streams` greedy streams of `tokens` tokens each, after their first token."""
    request = engine_pb2.GenerateRequest(
        token_ids=[128000] + [1000 + i for i in range(127)],
        sampling_params=common_pb2.SamplingParams(temperature=0, max_tokens=tokens, ignore_eos=True),
    )
    firsts: list[float] = []

    async def one() -> int:
        count = 0
        async for message in stub.Generate(request):
            if not count:
                firsts.append(time.perf_counter())
            count += sum(len(c.token_ids) for c in message.choices)
        return count

    counts = await asyncio.gather(*(one() for _ in range(streams)))
    return (sum(counts) - streams) / (time.perf_counter() - max(firsts))


async def bench(target: str, args) -> dict:
    options = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
    await wait_serving(target)
    async with grpc.aio.insecure_channel(target, options=options) as channel:
        stub, control = engine_pb2_grpc.EngineServiceStub(channel), control_pb2_grpc.EngineControlServiceStub(channel)
        result: dict = {"shape": args.shape, "streams": args.streams, "device": torch.cuda.get_device_name()}
        result["decode_tok_s_before_sleep"] = await decode_rate(stub, args.streams, args.new_tokens)
        state = trainer_weights(args.shape)
        result["gb"] = sum(t.numel() * t.element_size() for t in state.values()) / 1e9
        request = engine_pb2.GenerateRequest(
            token_ids=[128000] + [2000 + i for i in range(127)],
            sampling_params=common_pb2.SamplingParams(temperature=0, max_tokens=4096, ignore_eos=True),
        )
        calls = [stub.Generate(request) for _ in range(args.streams)]
        await asyncio.gather(*(call.read() for call in calls))  # every stream has started
        await control.InitWeightTransfer(C.InitWeightTransferRequest(packed=bool(args.vllm_packer)))
        paused = time.perf_counter()
        await control.Pause(C.PauseRequest(mode=C.PAUSE_MODE_KEEP))
        started = time.perf_counter()
        await control.StartWeightUpdate(C.StartWeightUpdateRequest())
        if args.vllm_packer:
            result["packed_bytes"], result["chunks"] = args.packed_bytes, 0
            for update in packed_updates(state, args.vllm_packer, args.packed_bytes):
                await control.UpdateWeights(update)
                result["chunks"] += 1
        else:
            await control.UpdateWeights(ipc_update(state))
        await control.FinishWeightUpdate(C.FinishWeightUpdateRequest(weight_version="bench-1"))
        finished = time.perf_counter()
        await control.Resume(C.ResumeRequest())
        resumed = time.perf_counter()
        result["update_s"] = finished - started
        result["pause_to_resume_s"] = resumed - paused
        versions = set()
        for call in calls:
            message = await call.read()  # may still be one sent before the pause
            versions.add(message.weight_version)
            call.cancel()
        result["versions_read_after_resume"] = sorted(versions)
        engine_weights = await control.GetWeightChecksums(C.GetWeightChecksumsRequest())
        mine = weights.digests(state)
        result["checksums_match_the_trainer"] = all(engine_weights.checksums.get(n) == d for n, d in mine.items())
        del state
        torch.cuda.empty_cache()
        t = time.perf_counter()
        await control.Sleep(C.SleepRequest(level=1))
        result["sleep_s"] = time.perf_counter() - t
        t = time.perf_counter()
        await control.WakeUp(C.WakeUpRequest())
        result["wake_up_s"] = time.perf_counter() - t
        result["decode_tok_s_after_wake_up"] = await decode_rate(stub, args.streams, args.new_tokens)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="llama-8b")
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--num-kv-blocks", type=int, default=8192, help="leaves room for the trainer's copy")
    parser.add_argument("--vllm-packer", default="", help="vLLM's packed_tensor.py: send packed IPC chunks with it")
    parser.add_argument("--packed-bytes", type=int, default=1 << 30, help="with --vllm-packer: its buffer's size")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    command = [sys.executable, "-m", "bench.engine.server", "--shape", args.shape, "--device", "cuda", "--port", "0"]
    command += ["--metrics-port", "-1", "--weight-transfer-backend", "ipc", "--max-num-seqs", str(args.streams)]
    command += ["--num-kv-blocks", str(args.num_kv_blocks), "--log-level", "WARNING"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        line = ""
        while not line.startswith("LISTENING"):
            line = server.stdout.readline() if server.stdout else ""
            if not line and server.poll() is not None:
                raise RuntimeError("the engine server exited before listening")
        result = asyncio.run(bench(line.split()[-1], args))
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
