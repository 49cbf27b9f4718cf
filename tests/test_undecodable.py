"""Bytes that are not the method's message are INVALID_ARGUMENT INVALID_MESSAGE, on every kind of method, and
neither they nor a servicer's bug put Python's text in the answer."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from scaleout.v1 import render_pb2
from scaleout_common.config import server_parser
from scaleout_common.server import serve
from tests.serving import NoLifecycle

SERVICE = "test.Typed"
CORRUPT = b"\xff\xff\xff\xff\x0f not a message"  # a varint tag past the end: protobuf's DecodeError
Req = render_pb2.TokenizeRequest


class Typed(NoLifecycle):
    """Four methods, one of each kind, that take a real message type and echo the prompt."""

    service_names = (SERVICE,)

    def register(self, server):
        async def unary(request, context):
            if request.prompt == "bug":
                raise RuntimeError("secret internals")
            return request

        async def server_stream(request, context):
            yield request

        async def client_stream(requests, context):
            return Req(prompt="".join([r.prompt async for r in requests]))

        async def bidi(requests, context):
            async for request in requests:
                yield request

        kinds = {
            "Unary": grpc.unary_unary_rpc_method_handler(unary, Req.FromString, Req.SerializeToString),
            "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream, Req.FromString, Req.SerializeToString),
            "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream, Req.FromString, Req.SerializeToString),
            "Bidi": grpc.stream_stream_rpc_method_handler(bidi, Req.FromString, Req.SerializeToString),
        }
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, kinds)])


def _reason(error: grpc.aio.AioRpcError) -> str:
    info = error_details_pb2.ErrorInfo()
    next(d for d in rpc_status.from_call(error).details if d.Is(info.DESCRIPTOR)).Unpack(info)
    return info.reason


@pytest.fixture
async def channel():
    args = server_parser("typed", 0, "typed").parse_args(
        ["--port", "0", "--metrics-port", "-1", "--drain-delay-s", "0"]
    )
    stop, bound = asyncio.Event(), asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(Typed(), args, stop=stop, listening=bound.set_result))
    port = await bound
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as opened:
        await opened.channel_ready()
        yield opened
    stop.set()
    await asyncio.wait_for(task, 10)


async def _call(channel, kind: str, payloads: list[bytes]):
    path = f"/{SERVICE}/{kind}"
    raw = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
    if kind == "Unary":
        return await channel.unary_unary(path, **raw)(payloads[0], timeout=10)
    if kind == "ServerStream":
        return [m async for m in channel.unary_stream(path, **raw)(payloads[0], timeout=10)]

    async def requests():
        for payload in payloads:
            yield payload

    if kind == "ClientStream":
        return await channel.stream_unary(path, **raw)(requests(), timeout=10)
    return [m async for m in channel.stream_stream(path, **raw)(requests(), timeout=10)]


@pytest.mark.parametrize("kind", ["Unary", "ServerStream", "ClientStream", "Bidi"])
async def test_corrupt_bytes_are_invalid_argument_without_python_text(channel, kind):
    good = Req(prompt="hi").SerializeToString()
    assert await _call(channel, kind, [good]) is not None
    payloads = [CORRUPT] if kind in ("Unary", "ServerStream") else [good, CORRUPT]
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await _call(channel, kind, payloads)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _reason(raised.value) == "INVALID_MESSAGE"
    assert "Error" not in raised.value.details() and "<class" not in raised.value.details()


async def test_a_bug_answers_an_incident_id_not_the_exception(channel):
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await _call(channel, "Unary", [Req(prompt="bug").SerializeToString()])
    assert raised.value.code() == grpc.StatusCode.INTERNAL and _reason(raised.value) == "INTERNAL_ERROR"
    assert "secret internals" not in raised.value.details() and "RuntimeError" not in raised.value.details()
    assert "incident" in raised.value.details()
