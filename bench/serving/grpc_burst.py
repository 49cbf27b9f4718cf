"""How long grpc.aio takes to start a burst of new calls, without our services: a server process whose
server-streaming handler stamps its entry, and a client that sends bursts of B new calls while S other streams
tick every 2 ms. Prints the delay from each call's send to its handler's entry (perf_counter: one clock for
every process of the host). A multi-turn closed loop sends its turns in such bursts.

    python -m bench.serving.grpc_burst --bursts 1,32 --ticking 0,32 [--server threads]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time
from concurrent import futures

import grpc
import uvloop

TICK = b"tick"


def _generic(stream) -> tuple[grpc.GenericRpcHandler]:
    handler = grpc.unary_stream_rpc_method_handler(stream, bytes, bytes)
    return (grpc.method_handlers_generic_handler("bench.Burst", {"Stream": handler}),)


def _serve(ports, entries) -> None:
    """grpc.aio on uvloop, as our services run."""

    async def stream(request: bytes, context):
        if request == TICK:
            while True:
                await asyncio.sleep(0.002)
                yield b"x" * 20
        entries.put((request, time.perf_counter()))
        yield b"first"

    async def run() -> None:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers(_generic(stream))
        ports.put(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        await server.wait_for_termination()

    uvloop.run(run())


def _serve_threads(ports, entries) -> None:
    """grpcio's thread-pool server, for comparison."""

    def stream(request: bytes, context):
        if request == TICK:
            while context.is_active():
                time.sleep(0.002)
                yield b"x" * 20
            return
        entries.put((request, time.perf_counter()))
        yield b"first"

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=128))
    server.add_generic_rpc_handlers(_generic(stream))
    ports.put(server.add_insecure_port("127.0.0.1:0"))
    server.start()
    server.wait_for_termination()


async def measure(port: int, entries, ticking: int, burst: int, rounds: int) -> list[float]:
    """Send->handler delays (ms) of `rounds` bursts of `burst` calls beside `ticking` streaming calls."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_stream("/bench.Burst/Stream", request_serializer=bytes, response_deserializer=bytes)

        async def drain(request: bytes) -> None:
            async for _ in call(request):
                pass

        tickers = [asyncio.create_task(drain(TICK)) for _ in range(ticking)]
        await asyncio.sleep(0.5)
        sent: dict[bytes, float] = {}
        for r in range(rounds):
            keys = [f"{ticking}-{burst}-{r}-{i}".encode() for i in range(burst)]
            sent.update((key, time.perf_counter()) for key in keys)
            await asyncio.gather(*[drain(key) for key in keys])
            await asyncio.sleep(0.05)
        for ticker in tickers:
            ticker.cancel()
    entered = dict(entries.get() for _ in sent)
    return [(entered[key] - at) * 1e3 for key, at in sent.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bursts", default="1,32", help="new calls sent at once (comma list)")
    parser.add_argument("--ticking", default="0,32", help="streams ticking beside them (comma list)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--server", choices=["aio", "threads"], default="aio", help="grpc.aio or the thread-pool server"
    )
    args = parser.parse_args()
    print(f"grpcio {grpc.__version__}, {args.server} server", flush=True)
    context = multiprocessing.get_context("spawn")
    ports, entries = context.Queue(), context.Queue()
    serve = _serve if args.server == "aio" else _serve_threads
    server = context.Process(target=serve, args=(ports, entries), daemon=True)
    server.start()
    port = ports.get()
    try:
        for ticking in map(int, args.ticking.split(",")):
            for burst in map(int, args.bursts.split(",")):
                delays = sorted(asyncio.run(measure(port, entries, ticking, burst, args.rounds)))
                print(
                    f"{ticking:4d} streams ticking, bursts of {burst:3d}: send -> handler ms "
                    f"p50 {statistics.median(delays):6.2f}  max {delays[-1]:6.2f}",
                    flush=True,
                )
    finally:
        server.kill()


if __name__ == "__main__":
    main()
