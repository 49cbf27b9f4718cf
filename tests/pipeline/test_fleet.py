"""pipeline_svc/fleet.py over real gRPC servers on loopback: a call reaches every replica, a host name stands for
all its addresses, a dead replica or an unresolvable host is one answer among the others, and the caller's
identity goes with each call."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from devstack.stack import free_port
from pipeline_svc.fleet import Engines, Fleet
from scaleout.v1 import engine_pb2, engine_pb2_grpc
from scaleout_common.identity import Caller


class _Engine(engine_pb2_grpc.EngineServiceServicer):
    def __init__(self, running: int):
        self.running = running
        self.seen: list[dict] = []

    async def GetLoad(self, request, context):
        self.seen.append(dict(context.invocation_metadata()))
        return engine_pb2.GetLoadResponse(running=self.running)


async def _serve(engine: _Engine) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    engine_pb2_grpc.add_EngineServiceServicer_to_server(engine, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def test_engines_parse():
    assert Engines.parse("engine:50052, 10.0.0.1:1,[::1]:7").hosts == (("engine", 50052), ("10.0.0.1", 1), ("::1", 7))
    with pytest.raises(ValueError, match="host:port"):
        Engines.parse("engine")


def test_a_call_reaches_every_replica_and_reports_each():
    async def main():
        engines = [_Engine(1), _Engine(2)]
        served = [await _serve(e) for e in engines]
        dead = free_port()
        spec = ",".join(f"127.0.0.1:{port}" for _, port in served) + f",127.0.0.1:{dead},no-such-host.invalid:1"
        fleet = Fleet(Engines.parse(spec))
        try:
            metadata = Caller("ops", admin=True).metadata()
            answers = await fleet.call(
                engine_pb2_grpc.EngineServiceStub, "GetLoad", engine_pb2.GetLoadRequest(), metadata=metadata
            )
        finally:
            await fleet.close()
            for server, _ in served:
                await server.stop(None)
        by_address = {a.replica.address: a for a in answers}
        assert [by_address[f"127.0.0.1:{port}"].response.running for _, port in served] == [1, 2]
        dead_error, unresolved_error = by_address[f"127.0.0.1:{dead}"].error, by_address["no-such-host.invalid:1"].error
        assert dead_error is not None and dead_error.code == grpc.StatusCode.UNAVAILABLE
        assert unresolved_error is not None and unresolved_error.reason == "UPSTREAM_UNAVAILABLE"
        assert all(e.seen[0]["x-scaleout-client"] == "ops" and e.seen[0]["x-scaleout-admin"] == "true" for e in engines)

    asyncio.run(main())


def test_a_name_stands_for_all_its_addresses():
    async def main():
        engine = _Engine(3)
        server, port = await _serve(engine)
        fleet = Fleet(Engines.parse(f"localhost:{port},127.0.0.1:{port}"))
        try:
            replicas, unresolved = await fleet.replicas()
        finally:
            await fleet.close()
            await server.stop(None)
        # localhost's IPv4 record, and the same address named twice: one replica.
        assert [r.address for r in replicas] == [f"127.0.0.1:{port}"] and unresolved == []

    asyncio.run(main())
