"""The load: conversations through a client, in a closed loop of streams or by Poisson arrivals, from this
process or spread over several load-generator processes.

One Python asyncio gRPC client tops out at some tens of thousands of streamed messages a second: at 32 streams
of a 1-2 ms decode step it is the client, not the server, that sets TTFT and ITL. So the bench reports how busy
its busiest load-generator process was (CPU time over wall time: near 100% means the figures time the
client), and `--client-processes N` splits the streams (or the request rate) over N processes that start
together, each over `--connections` connections of its own (an engine with `--api-servers` is dealt
connections, not calls). Timings are perf_counter stamps: one monotonic clock for every process of the host.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import queue
import random
import time
from dataclasses import dataclass

from bench.serving.clients import EngineClient, GatewayChatClient
from bench.serving.datasets import Conversation
from bench.serving.metrics import RequestResult

CLIENTS = {"engine": EngineClient, "gateway": GatewayChatClient}


@dataclass
class Load:
    concurrency: int  # closed-loop streams; 0: Poisson arrivals at `rate`
    rate: float
    seed: int
    salt: str = ""


@dataclass
class Driven:
    results: list[RequestResult]
    duration_s: float  # first request sent to last answer done
    busiest: float  # CPU seconds per wall second of the busiest load-generator process
    processes: int = 1


async def drive(client, conversations: list[Conversation], load: Load) -> list[RequestResult]:
    """Every conversation through `client`: a closed loop of `load.concurrency` streams, or Poisson arrivals."""
    results: list[RequestResult] = []
    if load.concurrency > 0:
        queue = list(reversed(conversations))

        async def stream():
            while queue:
                results.extend(await client.conversation(queue.pop(), load.salt))

        await asyncio.gather(*[stream() for _ in range(load.concurrency)])
        return results
    rng = random.Random(load.seed)
    tasks = []
    for conversation in conversations:
        tasks.append(asyncio.create_task(client.conversation(conversation, load.salt)))
        if math.isfinite(load.rate):
            await asyncio.sleep(rng.expovariate(load.rate))
    for done in await asyncio.gather(*tasks):
        results.extend(done)
    return results


async def _timed(client, conversations: list[Conversation], load: Load, ready=None) -> tuple[list, float]:
    await client.ready()  # connecting is not part of the first request's TTFT
    if ready is not None:
        ready.wait(timeout=300)  # every load-generator process starts at once
    cpu, wall = time.process_time(), time.perf_counter()
    results = await drive(client, conversations, load)
    return results, (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)


def _share(kind: str, target: str, connections: int, conversations: list[Conversation], load: Load, ready, out) -> None:
    """One load-generator process: its share of the conversations through its own connections."""

    async def run():
        client = CLIENTS[kind](target, connections)
        try:
            return await _timed(client, conversations, load, ready)
        finally:
            await client.close()

    out.put(asyncio.run(run()))


async def run_load(client, conversations: list[Conversation], load: Load, processes: int = 1) -> Driven:
    """The load through `client` (this process), or spread over `processes` processes of the same kind of
    client: the streams (or the rate) and the conversations split evenly between them."""
    processes = min(processes, load.concurrency or len(conversations), len(conversations))  # none idle
    if processes <= 1:
        results, busy = await _timed(client, conversations, load)
        return Driven(results, _span(results), busy)
    context = multiprocessing.get_context("spawn")
    ready, out = context.Barrier(processes), context.Queue()
    kind = next(k for k, cls in CLIENTS.items() if isinstance(client, cls))
    workers = []
    for i in range(processes):
        streams = load.concurrency // processes + (i < load.concurrency % processes) if load.concurrency else 0
        share = Load(streams, load.rate / processes, load.seed + i, load.salt)
        args = (kind, client.target, client.connections, conversations[i::processes], share, ready, out)
        workers.append(context.Process(target=_share, args=args, daemon=True))
    for worker in workers:
        worker.start()
    shares = await _collect(workers, out)
    results = [r for share_results, _ in shares for r in share_results]
    return Driven(results, _span(results), max(busy for _, busy in shares), processes)


async def _collect(workers, out) -> list[tuple[list, float]]:
    shares = []
    while len(shares) < len(workers):
        try:
            shares.append(await asyncio.to_thread(out.get, True, 1.0))
        except queue.Empty:
            if any(w.exitcode not in (None, 0) for w in workers):
                for worker in workers:
                    worker.kill()
                raise RuntimeError("a load-generator process failed (its traceback is above)") from None
    for worker in workers:
        worker.join()
    return shares


def _span(results: list[RequestResult]) -> float:
    return max(r.end for r in results) - min(r.start for r in results) if results else 0.0
