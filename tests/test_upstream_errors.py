"""A downstream failure without an ErrorInfo (Envoy's own UNAVAILABLE, a deadline, a refused connection, a gRPC
core error) keeps its code and gets a reason of the table by its code's family (errors.untyped_reason), in the
status passed on and in OpenAI's and Anthropic's error objects; the gateway's Lua filter gets the same table."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.rpc import status_pb2

from devstack.stack import free_port
from gateway.envoy_config import render_config
from scaleout_common.errors import ServiceError
from scaleout_common.openai_errors import anthropic_error_object, error_object
from scaleout_common.reasons import Reason, fail

C = grpc.StatusCode
FAMILIES = [
    (C.UNAVAILABLE, Reason.UPSTREAM_UNAVAILABLE),
    (C.DEADLINE_EXCEEDED, Reason.UPSTREAM_TIMEOUT),
    (C.INTERNAL, Reason.UPSTREAM_ERROR),
    (C.UNKNOWN, Reason.UPSTREAM_ERROR),
    (C.RESOURCE_EXHAUSTED, Reason.UPSTREAM_ERROR),
]


@pytest.mark.parametrize(("code", "reason"), FAMILIES)
def test_a_status_without_a_reason_keeps_its_code_and_gets_a_table_reason(code, reason):
    failure = ServiceError.from_status(status_pb2.Status(code=code.value[0], message="no healthy upstream"))
    assert (failure.code, failure.reason, failure.message, failure.typed) == (
        code,
        reason,
        "no healthy upstream",
        False,
    )
    assert failure.to_status().details, "passed on with its ErrorInfo"
    assert ServiceError.from_status(failure.to_status()).typed, "downstream of here, it is typed"


def test_a_typed_status_passes_on_as_it_is():
    typed = fail(Reason.QUEUE_FULL, "the queue is full")
    again = ServiceError.from_status(typed.to_status())
    assert (again.code, again.reason, again.message, again.typed) == (
        C.RESOURCE_EXHAUSTED,
        Reason.QUEUE_FULL,
        typed.message,
        True,
    )


async def test_real_untyped_failures_get_table_reasons():
    """Calls that fail without a rich status: an abort with a bare code, a deadline, a port nobody listens on."""

    async def bare(request: bytes, context) -> bytes:
        if request == b"slow":
            await asyncio.sleep(2)
        await context.abort(C.UNAVAILABLE, "no healthy upstream")
        return b""

    handler = grpc.unary_unary_rpc_method_handler(bare)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Bare", {"Call": handler})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    failures = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/test.Bare/Call")
            for request, timeout in ((b"", 10), (b"slow", 0.1)):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await call(request, timeout=timeout)
                failures.append(ServiceError.of(caught.value))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{free_port()}") as nobody:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await nobody.unary_unary("/test.Bare/Call")(b"", timeout=10)
            failures.append(ServiceError.of(caught.value))
    finally:
        await server.stop(0)
    assert [(f.code, f.reason, f.typed) for f in failures] == [
        (C.UNAVAILABLE, Reason.UPSTREAM_UNAVAILABLE, False),
        (C.DEADLINE_EXCEEDED, Reason.UPSTREAM_TIMEOUT, False),
        (C.UNAVAILABLE, Reason.UPSTREAM_UNAVAILABLE, False),
    ]
    assert failures[0].message == "no healthy upstream"


def test_the_rest_error_objects_carry_the_table_reason():
    unavailable = ServiceError.from_status(
        status_pb2.Status(code=C.UNAVAILABLE.value[0], message="no healthy upstream")
    )
    assert error_object(unavailable) == {
        "error": {
            "message": "no healthy upstream",
            "type": "server_error",
            "param": None,
            "code": "UPSTREAM_UNAVAILABLE",
        }
    }
    assert anthropic_error_object(unavailable)["error"]["type"] == "overloaded_error"
    timeout = ServiceError.from_status(status_pb2.Status(code=C.DEADLINE_EXCEEDED.value[0]))
    assert error_object(timeout)["error"]["code"] == "UPSTREAM_TIMEOUT"
    assert anthropic_error_object(timeout)["error"]["type"] == "api_error"


def test_the_gateway_filter_maps_every_code_the_same_way():
    config = render_config([], 8080, 9901)
    for code in C:
        assert (
            f'[{code.value[0]}] = \\"{ServiceError.from_status(status_pb2.Status(code=code.value[0])).reason}\\"'
            in config
        )
