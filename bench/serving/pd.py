"""P/D against colocated on one machine (python -m bench.serving.pd): two engine servers of one shape (seeded random
weights: the same model), one `--kv-role prefill`, one `--kv-role decode`, and what a KV handoff costs.

- transfer: a prompt of N tokens prefilled and kept (hand_off), then pulled by this process with the decode
  engine's own puller (engine_svc/serving/kv_transfer/pull.py), once per transport: the gRPC stream (the bytes
  landing on the host) and, on CUDA, CUDA IPC (this process maps the prefill engine's cache and copies the blocks
  device to device, as a decode engine on the same GPU does); beside the copy bound: the same bytes device -> host
  -> device (pinned) in this process;
- TTFT and TPOT of `--requests` requests sent at once: P/D (the prefill step on one engine, then the decode step on
  the other, which pulls and decodes; TTFT from the prefill call's start to the first decoded token) against the
  same requests sent whole to the decode engine alone (colocated); `transports` counts the decode engine's pulls
  by the transport its responses name.

The engines' logs go to --log-dir (default: $OUT when set, else a new temporary folder), kept after the run: a
failure's incident ids are there (and their tails are printed when a call fails). Prints JSON (and writes it to
--json). On one GPU both engines share the device, so P/D shows its cost, not its
benefit (no interference between prefills and decodes is removed).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import torch

from engine_svc.serving.kv_transfer.pull import Puller
from engine_svc.serving.kv_transfer.transport import CUDA_IPC, STREAM
from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc, kv_transfer_pb2

CHANNEL = [("grpc.max_receive_message_length", 1 << 28)]


def start(args, role: str, port: int, log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "bench.engine.server", "--shape", args.shape, "--device", args.device]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--metrics-port", "-1", "--kv-role", role]
    argv += ["--engine-core", "thread", "--kv-cache-memory-fraction", str(args.kv_fraction)]
    with log.open("w") as out:
        return subprocess.Popen(argv + args.engine_flags.split(), stdout=out, stderr=subprocess.STDOUT)


def tail(log: Path) -> str:
    return log.read_text()[-4000:]


async def ready(stub, process: subprocess.Popen, log: Path) -> engine_pb2.GetModelInfoResponse:
    while True:
        if process.poll() is not None:
            raise SystemExit(f"an engine exited with {process.returncode}:\n{tail(log)}")
        try:
            return await stub.GetModelInfo(engine_pb2.GetModelInfoRequest(), timeout=2)
        except grpc.aio.AioRpcError:
            await asyncio.sleep(1)


def request(prompt: list[int], max_tokens: int, **transfer) -> engine_pb2.GenerateRequest:
    sampling = common_pb2.SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    message = engine_pb2.GenerateRequest(token_ids=prompt, sampling_params=sampling)
    if transfer:
        message.kv_transfer.CopyFrom(kv_transfer_pb2.KvTransfer(**transfer))
    return message


def prompt_of(length: int, salt: int) -> list[int]:
    """Distinct prompts (no prefix-cache hits between them)."""
    return [1] + [(salt * 7919 + i * 31) % 30000 + 100 for i in range(length - 1)]


async def transfer(prefill, puller: Puller, length: int, salt: int) -> dict:
    """One handoff of `length` tokens pulled by `puller`: its time and the transport that ran."""
    prompt = prompt_of(length, salt)
    handoff = (await prefill.GenerateUnary(request(prompt, 1, hand_off=True))).kv_handoff
    before = dict(puller.pulls)
    start = time.perf_counter()
    pulled = await puller.pull(handoff, prompt, 120)
    seconds = time.perf_counter() - start
    (way,) = [k for k, v in puller.pulls.items() if v != before.get(k, 0)]
    return {"tokens": length, "bytes": pulled.data.numel(), "transport": way, "pull_s": seconds}


def copy_bound_s(size: int, device: str) -> float | None:
    """Device -> host -> device of `size` bytes through pinned memory, best of 5 (None off CUDA)."""
    if not device.startswith("cuda"):
        return None
    data, host = torch.empty(size, dtype=torch.uint8, device=device), torch.empty(size, dtype=torch.uint8).pin_memory()
    best = float("inf")
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        host.copy_(data, non_blocking=True)
        data.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


async def one(args, prefill, decode, pd: bool, salt: int) -> tuple[float, list[float], str]:
    """TTFT, the gaps between later tokens and the KV transport ("" colocated) of one request."""
    prompt = prompt_of(args.prompt_tokens, salt)
    start = time.perf_counter()
    message = request(prompt, args.output_tokens)
    if pd:
        handoff = (await prefill.GenerateUnary(request(prompt, 1, hand_off=True))).kv_handoff
        message.kv_transfer.CopyFrom(kv_transfer_pb2.KvTransfer(pull=handoff))
    stamps, way = [], ""
    async for m in decode.Generate(message):
        way = way or m.prompt.kv_transport
        if any(c.token_ids for c in m.choices):
            stamps.append(time.perf_counter())
    return stamps[0] - start, [b - a for a, b in itertools.pairwise(stamps)], way


async def load(args, prefill, decode, pd: bool, salt: int) -> dict:
    results = await asyncio.gather(*(one(args, prefill, decode, pd, salt + k) for k in range(args.requests)))
    ttft = sorted(r[0] for r in results)
    gaps = [g for r in results for g in r[1]]
    out = {
        "ttft_p50_ms": 1e3 * statistics.median(ttft),
        "ttft_p90_ms": 1e3 * ttft[int(0.9 * (len(ttft) - 1))],
        "tpot_mean_ms": 1e3 * statistics.fmean(gaps) if gaps else None,
    }
    if pd:  # as the decode engine's responses name them (PromptInfo.kv_transport)
        out["transports"] = dict(collections.Counter(r[2] for r in results))
    return out


async def transfers(args, prefill, layout) -> list[dict]:
    """Each --transfer-tokens length pulled by each transport this machine has (after a warm-up pull of each)."""
    device = torch.device(args.device)
    pullers = [Puller(layout, torch.device("cpu"), None)]  # no device to map into: the stream
    if device.type == "cuda":
        pullers.append(Puller(layout, device, None))  # the same GPU, another process: CUDA IPC
    rows = []
    for k, puller in enumerate(pullers):
        await transfer(prefill, puller, 256, 10 + k)  # warm-up (and the one ShareKvCache)
        for i, tokens in enumerate(args.transfer_tokens):
            row = await transfer(prefill, puller, tokens, 100 + 10 * k + i)
            row["copy_bound_s"] = copy_bound_s(row["bytes"], args.device)
            row["pull_s_per_1000_tokens"] = row["pull_s"] * 1000 / tokens
            rows.append(row)
    assert {row["transport"] for row in rows} <= {STREAM, CUDA_IPC}
    del pullers  # their mappings and staging: this process's GPU memory back to the engines
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rows


async def run(args) -> dict:
    prefill_port, decode_port = args.port, args.port + 1
    folder = Path(args.log_dir)  # main() made it
    logs = folder / "prefill.log", folder / "decode.log"
    print(f"engine logs: {logs[0]} {logs[1]}", file=sys.stderr, flush=True)
    processes = [start(args, "prefill", prefill_port, logs[0])]
    out: dict = {"shape": args.shape, "device": args.device, "requests": args.requests}
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{prefill_port}", options=CHANNEL) as prefill_channel:
            prefill = engine_pb2_grpc.EngineServiceStub(prefill_channel)
            await ready(prefill, processes[0], logs[0])  # the decode engine sizes its cache from what this one left
            processes.append(start(args, "decode", decode_port, logs[1]))
            async with grpc.aio.insecure_channel(f"127.0.0.1:{decode_port}", options=CHANNEL) as decode_channel:
                decode = engine_pb2_grpc.EngineServiceStub(decode_channel)
                layout = (await ready(decode, processes[1], logs[1])).kv_layout
                out["transfer"] = await transfers(args, prefill, layout)
                await load(args, prefill, decode, True, 500)  # warm-up of both paths
                out["colocated"] = await load(args, prefill, decode, False, 1_000)
                out["pd"] = await load(args, prefill, decode, True, 2_000)
    except grpc.aio.AioRpcError:
        for log in logs:  # the incident behind an INTERNAL, when an engine logged one
            print(f"--- {log}:\n{tail(log)}", file=sys.stderr, flush=True)
        raise
    finally:
        for process in processes:
            process.terminate()
            process.wait()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="llama-8b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--port", type=int, default=50160)
    parser.add_argument("--kv-fraction", type=float, default=0.4, help="each engine's --kv-cache-memory-fraction")
    parser.add_argument("--engine-flags", default="", help="more engine flags, for both")
    parser.add_argument("--transfer-tokens", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--requests", type=int, default=16, help="sent at once, for TTFT and TPOT")
    parser.add_argument("--json", default="")
    parser.add_argument("--log-dir", default="", help="where the engines' logs go (default: $OUT, else a temp dir)")
    args = parser.parse_args()
    args.log_dir = args.log_dir or os.environ.get("OUT") or tempfile.mkdtemp(prefix="pd-")
    Path(args.log_dir).mkdir(parents=True, exist_ok=True)
    out = asyncio.run(run(args))
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
