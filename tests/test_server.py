"""The shared server bootstrap: health while loading and draining, readiness gate, typed errors, drain, config."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from scaleout_common.config import server_parser
from scaleout_common.errors import ServiceError
from scaleout_common.server import serve
from tests.serving import NoLifecycle

SERVICE = "test.Toy"


def _identity(payload: bytes) -> bytes:
    return payload


class Toy(NoLifecycle):
    """A bare generic-handler service: loads when told to, echoes, fails on demand, can be slow."""

    service_names = (SERVICE,)

    def __init__(self):
        self.may_finish_loading = asyncio.Event()

    def register(self, server):
        async def echo(request: bytes, context) -> bytes:
            if request == b"bad":
                raise ServiceError(
                    grpc.StatusCode.INVALID_ARGUMENT, "BAD_PAYLOAD", "payload must not be 'bad'", [("payload", "bad")]
                )
            if request == b"bug":
                raise RuntimeError("boom")
            if request == b"slow":
                await asyncio.sleep(1.0)
            return request

        handler = grpc.unary_unary_rpc_method_handler(
            echo, request_deserializer=_identity, response_serializer=_identity
        )
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Echo": handler})])

    async def load(self):
        await self.may_finish_loading.wait()


async def _health(channel, service=SERVICE):
    return (await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service))).status


def _reason(error: grpc.aio.AioRpcError) -> str:
    status = rpc_status.from_call(error)
    info = error_details_pb2.ErrorInfo()
    next(d for d in status.details if d.Is(info.DESCRIPTOR)).Unpack(info)
    return info.reason


async def test_lifecycle_health_gate_errors_and_drain():
    toy = Toy()
    args = server_parser("toy", 0, "toy").parse_args(["--port", "0", "--drain-grace-s", "5"])
    stop, bound = asyncio.Event(), asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(toy, args, stop=stop, listening=bound.set_result))
    port = await bound
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        echo = channel.unary_unary(f"/{SERVICE}/Echo")
        assert await _health(channel) == health_pb2.HealthCheckResponse.NOT_SERVING
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await echo(b"early")
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE and _reason(raised.value) == "NOT_READY"

        toy.may_finish_loading.set()
        while await _health(channel, "") != health_pb2.HealthCheckResponse.SERVING:
            await asyncio.sleep(0.01)
        assert await _health(channel) == health_pb2.HealthCheckResponse.SERVING
        assert await echo(b"hello") == b"hello"

        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await echo(b"bad")
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT and _reason(raised.value) == "BAD_PAYLOAD"
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await echo(b"bug")
        assert raised.value.code() == grpc.StatusCode.INTERNAL and _reason(raised.value) == "INTERNAL_ERROR"

        in_flight = asyncio.ensure_future(echo(b"slow"))
        await asyncio.sleep(0.2)
        stop.set()  # what SIGTERM does
        await asyncio.sleep(0.1)
        assert await in_flight == b"slow", "an in-flight call finishes during the drain"
    await asyncio.wait_for(task, 10)


def test_flags_take_environment_defaults(monkeypatch):
    monkeypatch.setenv("SCALEOUT_MAX_MESSAGE_MB", "7")
    monkeypatch.setenv("SCALEOUT_TRUST_REMOTE_CODE", "true")
    args = server_parser("toy", 1, "toy").parse_args([])
    assert args.max_message_mb == 7 and args.trust_remote_code is True
    assert server_parser("toy", 1, "toy").parse_args(["--max-message-mb", "9"]).max_message_mb == 9


# `run` on the toy in a process of its own: signals reach it as they reach a service.
RUN_TOY = (
    "import sys; from tests.test_server import Toy; from scaleout_common.config import server_parser; "
    "from scaleout_common.server import run; toy = Toy(); toy.may_finish_loading.set(); "
    "run(toy, server_parser('toy', 0, 'toy').parse_args(sys.argv[1:]))"
)


def test_a_second_signal_ends_the_drain_delay():
    flags = ["--port", "0", "--metrics-port", "-1", "--drain-delay-s", "60", "--drain-grace-s", "5"]
    process = subprocess.Popen([sys.executable, "-c", RUN_TOY, *flags], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        target = next(line.split()[-1] for line in process.stdout if line.startswith("LISTENING"))
        with grpc.insecure_channel(target) as channel:
            health = health_pb2_grpc.HealthStub(channel)

            def status():
                return health.Check(health_pb2.HealthCheckRequest(), timeout=5).status  # pyright: ignore[reportAttributeAccessIssue]

            while status() != health_pb2.HealthCheckResponse.SERVING:
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            while status() == health_pb2.HealthCheckResponse.SERVING:
                time.sleep(0.05)
            time.sleep(0.5)
            assert process.poll() is None, "one signal: the drain delay holds"
            process.send_signal(signal.SIGTERM)
            assert process.wait(15) == 0, "a second signal ends the delay"
    finally:
        process.kill()
        process.wait()
