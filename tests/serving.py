"""Run a real service on a loopback port inside the test's event loop, with the production bootstrap."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaleout_common.server import serve


class NoLifecycle:
    """A test service's lifecycle with nothing to load, drain or close (override what a service needs)."""

    async def load(self) -> None:
        pass

    async def drain(self) -> None:
        pass

    async def close(self) -> None:
        pass


# An in-process server has no gateway in front whose health checks must see it go: no drain delay when it stops
# (2.5 s by default, at the end of every test that starts one); `flags` may still set one.
NO_DRAIN_DELAY = ("--drain-delay-s", "0")


@contextlib.asynccontextmanager
async def serving(service, parser, *flags: str):
    """Start `service` (flags from `parser` with --port 0, then `flags`), wait until SERVING, yield "127.0.0.1:port"."""
    quick = NO_DRAIN_DELAY if parser.get_default("drain_delay_s") is not None else ()
    args = parser.parse_args(["--port", "0", "--metrics-port", "-1", *quick, *flags])
    stop, bound = asyncio.Event(), asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(service, args, stop=stop, listening=bound.set_result))
    port = await asyncio.wait_for(asyncio.shield(bound), 60)
    target = f"127.0.0.1:{port}"
    async with grpc.aio.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while (
            await stub.Check(health_pb2.HealthCheckRequest(service=""))
        ).status != health_pb2.HealthCheckResponse.SERVING:
            if task.done():
                task.result()
            await asyncio.sleep(0.05)
    try:
        yield target
    finally:
        stop.set()
        await task
