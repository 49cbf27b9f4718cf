"""RenderChat throughput through gRPC (one server process) next to in-process apply_chat_template + encode.

Prints requests/s for a short chat and a ~2,000-token chat, at concurrency 1 and 8, for single RenderChat calls
and RenderChatBatch (conversations/s), with the ratios and goals:
  single calls >= 0.8x in-process, >= 1,350/s short at concurrency 8 (1.5x vLLM's ~900/s), batch >= 4,000/s short.
First it prints the transport floor: a bare grpc.aio server that answers at once (noop_server.py), and our render
server's ListModels (no render work), driven by the same client.

The client is this process: one grpc.aio channel, `concurrency` coroutines each awaiting one call at a time, with
requests serialized up front. It costs ~250-300 us of CPU per call, on the same 2 cores as the server.

    python bench/render/bench_render.py [--seconds 3] [--batch 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaleout.v1 import render_pb2
from scaleout_common.models import load_tokenizer, resolve_model

SHORT = [{"role": "user", "content": "What is the capital of France?"}]
PARAGRAPH = "The quick brown fox jumps over the lazy dog while the render service counts every token it sees. "
LONG = [
    {"role": "system", "content": "You are a careful summarizer."},
    {"role": "user", "content": PARAGRAPH * 95},
    {"role": "assistant", "content": "Understood. What should I do with it?"},
    {"role": "user", "content": "Summarize it in one sentence."},
]
METHOD = "/scaleout.v1.RenderService/"


RENDER_SERVER = ["-m", "render_svc", "--port", "0", "--metrics-port", "-1", "--log-level", "WARNING"]
NOOP_SERVER = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "noop_server.py")]


def start_server(arguments: list[str]) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, *arguments], stdout=subprocess.PIPE, text=True)
    for line in process.stdout:
        match = re.match(r"LISTENING \S+ (\S+)", line)
        if match:
            return process, match.group(1)
    raise SystemExit(f"{arguments[0]} did not start")


def wait_serving(target: str) -> None:
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while stub.Check(health_pb2.HealthCheckRequest()).status != health_pb2.HealthCheckResponse.SERVING:
            time.sleep(0.1)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def in_process_rate(tokenizer, messages, concurrency: int, seconds: float) -> tuple[float, float]:
    """(renders/s, CPU seconds per render) of apply_chat_template(tokenize=True) in this process."""

    def render():
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)

    render()
    stop, counts = time.perf_counter() + seconds, [0] * concurrency

    def worker(i):
        while time.perf_counter() < stop:
            render()
            counts[i] += 1

    start, cpu_start = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(worker, range(concurrency)))
    return sum(counts) / (time.perf_counter() - start), (time.process_time() - cpu_start) / sum(counts)


async def grpc_rate(
    channel, method: str, payload: bytes, concurrency: int, seconds: float, server_pid: int, per_call: int = 1
) -> tuple[float, float, float]:
    """(items/s, server CPU seconds per item, client CPU seconds per item); requests are serialized up front."""
    call = channel.unary_unary(method)
    for _ in range(3):
        await call(payload)
    count, stop = 0, time.perf_counter() + seconds

    async def worker():
        nonlocal count
        while time.perf_counter() < stop:
            await call(payload)
            count += 1

    start, server_start, client_start = time.perf_counter(), cpu_seconds(server_pid), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    items = count * per_call
    return (
        items / (time.perf_counter() - start),
        (cpu_seconds(server_pid) - server_start) / items,
        (time.process_time() - client_start) / items,
    )


def chat_request(messages) -> render_pb2.RenderChatRequest:
    return json_format.ParseDict({"messages": messages}, render_pb2.RenderChatRequest())


async def floor_rates(target: str, pid: int, method: str, seconds: float) -> list[tuple]:
    """(concurrency, calls/s, server and client CPU seconds per call) of an empty request."""
    async with grpc.aio.insecure_channel(target) as channel:
        return [
            (concurrency, *await grpc_rate(channel, method, b"", concurrency, seconds, pid)) for concurrency in (1, 8)
        ]


async def measure(target: str, pid: int, tokenizer, seconds: float, batch: int) -> list[tuple]:
    rows = []
    async with grpc.aio.insecure_channel(target) as channel:
        for name, messages in (("short", SHORT), ("~2k tokens", LONG)):
            request = chat_request(messages)
            single = request.SerializeToString()
            batched = render_pb2.RenderChatBatchRequest(requests=[request] * batch).SerializeToString()
            for concurrency in (1, 8):
                local, local_cpu = in_process_rate(tokenizer, messages, concurrency, seconds)
                remote, remote_cpu, _ = await grpc_rate(
                    channel, METHOD + "RenderChat", single, concurrency, seconds, pid
                )
                many, many_cpu, _ = await grpc_rate(
                    channel, METHOD + "RenderChatBatch", batched, concurrency, seconds, pid, per_call=batch
                )
                rows.append((name, concurrency, local, local_cpu, remote, remote_cpu, many, many_cpu))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--batch", type=int, default=64, help="conversations per RenderChatBatch call")
    args = parser.parse_args()
    tokenizer = load_tokenizer(resolve_model(None))
    print(
        f"prompt tokens: short {len(tokenizer.apply_chat_template(SHORT, add_generation_prompt=True, return_dict=False))}, "
        f"long {len(tokenizer.apply_chat_template(LONG, add_generation_prompt=True, return_dict=False))}; "
        f"{os.cpu_count()} cores; one server process; {args.seconds:g} s per measurement; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    floors = {}
    process, target = start_server(NOOP_SERVER)
    try:
        floors["bare grpc.aio no-op server"] = asyncio.run(
            floor_rates(target, process.pid, "/bench.Noop/Call", args.seconds)
        )
    finally:
        process.terminate()
        process.wait(30)
    process, target = start_server(RENDER_SERVER)
    try:
        wait_serving(target)
        floors["render server, ListModels"] = asyncio.run(
            floor_rates(target, process.pid, METHOD + "ListModels", args.seconds)
        )
        rows = asyncio.run(measure(target, process.pid, tokenizer, args.seconds, args.batch))
    finally:
        process.terminate()
        process.wait(30)
    for name, floor in floors.items():
        for concurrency, rate, server_cpu, client_cpu in floor:
            print(
                f"floor: {name:<27} conc {concurrency}: {rate:5.0f}/s, CPU per call: server {server_cpu * 1e6:3.0f} us, "
                f"client {client_cpu * 1e6:3.0f} us"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f} (other work on the machine slows both sides)")
    print("rates are wall-clock; 'us' columns are CPU time per item (in-process: this process; srv: the server)")
    print(
        f"{'chat':<11} {'conc':>4} {'in-process/s':>12} {'us':>6} {'RenderChat/s':>12} {'ratio':>6} {'srv us':>7} "
        f"{'Batch conv/s':>12} {'ratio':>6} {'srv us':>7}"
    )
    for name, concurrency, local, local_cpu, remote, remote_cpu, many, many_cpu in rows:
        print(
            f"{name:<11} {concurrency:>4} {local:>12.0f} {local_cpu * 1e6:>6.0f} {remote:>12.0f} {remote / local:>5.2f}x "
            f"{remote_cpu * 1e6:>7.0f} {many:>12.0f} {many / local:>5.2f}x {many_cpu * 1e6:>7.0f}"
        )
    short8 = next(r for r in rows if r[0] == "short" and r[1] == 8)
    best_batch = max(r[6] for r in rows if r[0] == "short")
    print(
        f"goal: RenderChat short conc 8 >= 1350/s (1.5x vLLM ~900/s): {short8[4]:.0f}/s "
        f"{'met' if short8[4] >= 1350 else 'NOT met'}"
    )
    print(
        f"goal: RenderChatBatch short >= 4000 conv/s: {best_batch:.0f}/s {'met' if best_batch >= 4000 else 'NOT met'}"
    )
    ratios = [r[4] / r[2] for r in rows]
    print(
        f"goal: single calls >= 0.8x in-process: min {min(ratios):.2f}x {'met' if min(ratios) >= 0.8 else 'NOT met'} "
        f"(per row above)"
    )


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
