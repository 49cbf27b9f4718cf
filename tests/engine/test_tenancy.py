"""Request ids scoped by tenant (engine_svc/serving/tenancy.py): another tenant's live id is neither confirmed
(no DUPLICATE_REQUEST_ID across tenants) nor blocked, and Abort reaches only the caller's own requests, an admin's
every tenant's. The callers are named as the gateway names them (x-scaleout-client, x-scaleout-admin), with the
engine in a thread and, for aborts across API servers, with its core in a process shared by two of them."""

from __future__ import annotations

import grpc
import pytest

from scaleout.v1 import common_pb2, engine_pb2
from scaleout_common.identity import ADMIN_HEADER, CLIENT_HEADER
from tests.engine.conftest import engine_stub, request
from tests.engine.test_api_servers import connections

ALICE, BOB = ((CLIENT_HEADER, "alice"),), ((CLIENT_HEADER, "bob"),)
OPS = ((CLIENT_HEADER, "ops"), (ADMIN_HEADER, "true"))


def _long(request_id: str) -> engine_pb2.GenerateRequest:
    return request([1, 5, 6], request_id, temperature=1.0, max_tokens=400, ignore_eos=True)


async def _finish_reason(call) -> int:
    last = None
    while (message := await call.read()) is not grpc.aio.EOF:
        last = message
    assert last is not None and last.finished
    return last.choices[-1].finish_reason


async def test_a_live_id_is_neither_confirmed_nor_blocked_across_tenants(tiny_model):
    async with engine_stub(tiny_model) as (stub, _):
        alices = stub.Generate(_long("dup"), metadata=ALICE)
        assert (await alices.read()).request_id == "dup"
        bobs = stub.Generate(_long("dup"), metadata=BOB)  # the same id, another tenant: runs
        assert (await bobs.read()).request_id == "dup"
        with pytest.raises(grpc.aio.AioRpcError) as taken:  # the tenant's own live id: refused, as before
            await stub.GenerateUnary(_long("dup"), metadata=ALICE)
        assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS and "alice" not in (taken.value.details() or "")

        reply = await stub.Abort(engine_pb2.AbortRequest(request_ids=["dup"]), metadata=BOB)
        assert list(reply.aborted) == ["dup"]  # bob's own, and only it
        assert await _finish_reason(bobs) == common_pb2.FINISH_REASON_ABORT
        again = await stub.Abort(engine_pb2.AbortRequest(request_ids=["dup"]), metadata=BOB)
        assert list(again.aborted) == [] and list(again.not_found) == ["dup"]  # alice's is not bob's to see
        reply = await stub.Abort(engine_pb2.AbortRequest(request_ids=["dup"]), metadata=OPS)
        assert list(reply.aborted) == ["dup"]  # an admin reaches every tenant's
        assert await _finish_reason(alices) == common_pb2.FINISH_REASON_ABORT


async def _held_elsewhere(stubs, message, metadata) -> list[bool]:
    """For each stub, whether its server refuses `message`'s taken id in-band (the core: another server holds it)."""
    out = []
    for stub in stubs:
        try:
            async for reply in stub.Generate(message, metadata=metadata):
                assert reply.error.code == grpc.StatusCode.ALREADY_EXISTS.value[0], reply
                out.append(True)
                break
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.ALREADY_EXISTS
            out.append(False)
    return out


async def test_tenants_are_apart_across_api_servers_of_one_core():
    async with engine_stub(None, "--api-servers", "2") as (_, service), connections(service.port) as stubs:
        alices = stubs[0].Generate(_long("dup"), metadata=ALICE)
        await alices.read()
        elsewhere = stubs[(await _held_elsewhere(stubs, _long("dup"), ALICE)).index(True)]
        bobs = elsewhere.Generate(_long("dup"), metadata=BOB)  # another server, the same id, another tenant: runs
        assert (await bobs.read()).request_id == "dup"
        reply = await stubs[0].Abort(engine_pb2.AbortRequest(request_ids=["dup"]), metadata=BOB)
        assert list(reply.aborted) == ["dup"]  # bob's, held by the other server; alice's beside the caller is not his
        assert await _finish_reason(bobs) == common_pb2.FINISH_REASON_ABORT
        reply = await elsewhere.Abort(engine_pb2.AbortRequest(request_ids=["dup"]), metadata=OPS)
        assert list(reply.aborted) == ["dup"]
        assert await _finish_reason(alices) == common_pb2.FINISH_REASON_ABORT


async def test_without_keys_ids_are_shared_as_before(tiny_model):
    async with engine_stub(tiny_model) as (stub, _):
        call = stub.Generate(_long("plain"))
        await call.read()
        with pytest.raises(grpc.aio.AioRpcError) as taken:
            await stub.GenerateUnary(_long("plain"))
        assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS
        assert list((await stub.Abort(engine_pb2.AbortRequest(request_ids=["plain"]))).aborted) == ["plain"]
        assert await _finish_reason(call) == common_pb2.FINISH_REASON_ABORT
