"""Several API servers over one engine core (--api-servers): calls over many connections get the same outputs as
over one, a request id is one request whichever server holds it, Abort reaches a request from any connection,
and SIGTERM drains every server's streams before all of them end."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc
from tests.engine.conftest import engine_stub, generate, request
from tests.engine.test_cancel import _until_idle
from tests.engine.test_core_process import _rest
from tests.engine.test_generate import PROMPTS, reference

CONNECTIONS = 16  # the kernel hashes each to a server: all on one with odds 2^-15 for two servers


@contextlib.asynccontextmanager
async def connections(port: int):
    """CONNECTIONS stubs, each over its own connection (the kernel deals connections, not calls, to servers)."""
    channels = [
        grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(CONNECTIONS)
    ]
    try:
        yield [engine_pb2_grpc.EngineServiceStub(channel) for channel in channels]
    finally:
        for channel in channels:
            await channel.close()


async def _refusal(stub, message) -> str:
    """How a taken id is refused: `status` (by the server that holds it) or `in-band` (by the core, for another)."""
    try:
        async for reply in stub.Generate(message):
            assert reply.error.code == grpc.StatusCode.ALREADY_EXISTS.value[0], reply
            assert "DUPLICATE_REQUEST_ID" in str(reply.error)
            return "in-band"
    except grpc.aio.AioRpcError as error:
        assert error.code() == grpc.StatusCode.ALREADY_EXISTS
        return "status"
    raise AssertionError("a taken request id was not refused")


async def test_many_connections_share_one_core(tiny_model):
    async with engine_stub(None, "--api-servers", "3", "--block-size", "4") as (_, service):
        assert all(p.is_alive() for p in service.api_servers.processes) and len(service.api_servers.processes) == 2
        async with connections(service.port) as stubs:
            results = await asyncio.gather(
                *[
                    generate(s, request(PROMPTS[i % len(PROMPTS)], temperature=0, max_tokens=12, ignore_eos=True))
                    for i, s in enumerate(stubs)
                ]
            )
            long = stubs[0].Generate(request(PROMPTS[1], "long", temperature=1.0, max_tokens=400, ignore_eos=True))
            await long.read()
            taken = request(PROMPTS[0], "long", max_tokens=4)
            refusals = [await _refusal(s, taken) for s in stubs]
            elsewhere = stubs[refusals.index("in-band")]  # a connection another server holds
            reply = await elsewhere.Abort(engine_pb2.AbortRequest(request_ids=["long", "nobody"]))
            rest = await _rest(long)
            load = await _until_idle(elsewhere)
    for i, (messages, tokens) in enumerate(results):
        assert tokens[0] == reference(tiny_model, PROMPTS[i % len(PROMPTS)], 12)
        assert messages[-1].finished and messages[-1].usage.completion_tokens == 12
    assert refusals[0] == "status"  # by the server the request came to
    assert list(reply.aborted) == ["long"] and list(reply.not_found) == ["nobody"]
    assert rest[-1].finished and rest[-1].choices[-1].finish_reason == common_pb2.FINISH_REASON_ABORT
    assert (load.running, load.waiting, load.kv_blocks_used) == (0, 0, 0)


@contextlib.asynccontextmanager
async def engine_process():
    """`python -m engine_svc` with 2 API servers on the default model, in its own session; yields (process, port)
    once SERVING, and makes sure no process of its session outlives the test."""
    command = [sys.executable, "-m", "engine_svc", "--engine-core", "process", "--api-servers", "2"]
    server = subprocess.Popen(
        [
            *command,
            "--port",
            "0",
            "--metrics-port",
            "-1",
            "--drain-delay-s",
            "0.2",
            "--drain-grace-s",
            "120",
            "--log-level",
            "WARNING",
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        port = int(next(line for line in server.stdout if line.startswith("LISTENING")).rsplit(":", 1)[1])
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            readiness = health_pb2.HealthCheckRequest(service="scaleout.v1.EngineService")
            while (await health.Check(readiness)).status != health_pb2.HealthCheckResponse.SERVING:
                await asyncio.sleep(0.2)  # the first server is ready once every other one is
        yield server, port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)


async def _session_ends(server, within_s: float) -> bool:
    """Whether every process of the server's session is gone within `within_s`."""
    for _ in range(int(within_s * 10)):
        try:
            os.killpg(server.pid, 0)
        except ProcessLookupError:
            return True
        await asyncio.sleep(0.1)
    return False


async def test_sigterm_drains_every_api_server_then_all_end():
    async with engine_process() as (server, port), connections(port) as stubs:
        calls = [s.Generate(request([1, 5, 7], temperature=0, max_tokens=16, ignore_eos=True)) for s in stubs]
        for call in calls:
            await call.read()
        server.send_signal(signal.SIGTERM)  # the first server alone: it drains the others
        rests = [await _rest(call) for call in calls]
        assert server.wait(150) == 0
        assert await _session_ends(server, 5), "processes of the engine outlived it"
    for rest in rests:
        assert rest[-1].finished and not rest[-1].HasField("error")


async def test_the_others_drain_and_end_when_the_first_is_killed():
    async with engine_process() as (server, _):
        server.kill()  # SIGKILL: nothing of the first server's shutdown runs
        server.wait()
        assert await _session_ends(server, 15), "API servers or the core outlived the first server"
