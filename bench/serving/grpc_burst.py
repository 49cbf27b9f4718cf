"""How long grpc.aio takes to start a burst of new calls, without our services: server processes whose
server-streaming handler stamps its entry, and a client that sends bursts of B new calls while S other streams
tick every 2 ms. Prints the delay from each call's send to its handler's entry (perf_counter: one clock for
every process of the host). A multi-turn closed loop sends its turns in such bursts. `--servers N` runs N server
processes on one port (SO_REUSEPORT: the kernel spreads connections, so give the client as many `--channels`).

    python -m bench.serving.grpc_burst --bursts 1,32 --ticking 0,32 [--server threads] [--servers 4 --channels 4]
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


def _serve(ports, entries, port: int) -> None:
    """grpc.aio on uvloop, as our services run."""

    async def stream(request: bytes, context):
        if request == TICK:
            while True:
                await asyncio.sleep(0.002)
                yield b"x" * 20
        entries.put((request, time.perf_counter()))
        yield b"first"

    async def run() -> None:
        server = grpc.aio.server(options=[("grpc.so_reuseport", 1)])
        server.add_generic_rpc_handlers(_generic(stream))
        ports.put(server.add_insecure_port(f"127.0.0.1:{port}"))
        await server.start()
        await server.wait_for_termination()

    uvloop.run(run())


def _serve_threads(ports, entries, port: int) -> None:
    """grpcio's thread-pool server, for comparison."""

    def stream(request: bytes, context):
        if request == TICK:
            while context.is_active():
                time.sleep(0.002)
                yield b"x" * 20
            return
        entries.put((request, time.perf_counter()))
        yield b"first"

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=128), options=[("grpc.so_reuseport", 1)])
    server.add_generic_rpc_handlers(_generic(stream))
    ports.put(server.add_insecure_port(f"127.0.0.1:{port}"))
    server.start()
    server.wait_for_termination()


async def measure(port: int, entries, ticking: int, burst: int, rounds: int, channels: int) -> list[float]:
    """Send->handler delays (ms) of `rounds` bursts of `burst` calls beside `ticking` streaming calls, the calls
    dealt round-robin over `channels` connections."""
    # A local subchannel pool per channel: one connection each (channels to one target share one otherwise).
    opened = [
        grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(channels)
    ]
    calls = [
        c.unary_stream("/bench.Burst/Stream", request_serializer=bytes, response_deserializer=bytes) for c in opened
    ]
    await asyncio.gather(*[c.channel_ready() for c in opened])

    async def drain(request: bytes, i: int) -> None:
        async for _ in calls[i % channels](request):
            pass

    tickers = [asyncio.create_task(drain(TICK, i)) for i in range(ticking)]
    await asyncio.sleep(0.5)
    sent: dict[bytes, float] = {}
    for r in range(rounds):
        keys = [f"{ticking}-{burst}-{r}-{i}".encode() for i in range(burst)]
        sent.update((key, time.perf_counter()) for key in keys)
        await asyncio.gather(*[drain(key, i) for i, key in enumerate(keys)])
        await asyncio.sleep(0.05)
    for ticker in tickers:
        ticker.cancel()
    for channel in opened:
        await channel.close()
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
    parser.add_argument("--servers", type=int, default=1, help="server processes on one port (SO_REUSEPORT)")
    parser.add_argument("--channels", type=int, default=1, help="client connections the calls are dealt over")
    args = parser.parse_args()
    print(f"grpcio {grpc.__version__}, {args.servers} {args.server} server(s), {args.channels} channel(s)", flush=True)
    context = multiprocessing.get_context("spawn")
    ports, entries = context.Queue(), context.Queue()
    serve = _serve if args.server == "aio" else _serve_threads
    servers = [context.Process(target=serve, args=(ports, entries, 0), daemon=True)]
    servers[0].start()
    port = ports.get()
    for _ in range(args.servers - 1):
        servers.append(context.Process(target=serve, args=(ports, entries, port), daemon=True))
        servers[-1].start()
        ports.get()
    try:
        for ticking in map(int, args.ticking.split(",")):
            for burst in map(int, args.bursts.split(",")):
                delays = sorted(asyncio.run(measure(port, entries, ticking, burst, args.rounds, args.channels)))
                print(
                    f"{ticking:4d} streams ticking, bursts of {burst:3d}: send -> handler ms "
                    f"p50 {statistics.median(delays):6.2f}  max {delays[-1]:6.2f}",
                    flush=True,
                )
    finally:
        for server in servers:
            server.kill()


if __name__ == "__main__":
    main()
