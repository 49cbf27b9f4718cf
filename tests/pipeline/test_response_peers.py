"""Two pipeline replicas over real gRPC (no model): a response one of them stored is found, answered and deleted
through the other (ResponseStoreService between them), and an id no replica holds is NOT_FOUND on both."""

from __future__ import annotations

import asyncio
import contextlib
import json

import grpc
import pytest

from devstack.stack import free_port
from pipeline_svc import responses_turn
from pipeline_svc.response_peers import Peers, tag_of
from pipeline_svc.service import PipelineService, parser
from scaleout.v1 import responses_pb2, responses_pb2_grpc
from scaleout_common.errors import ServiceError
from scaleout_common.identity import ADMIN_HEADER, CLIENT_HEADER, Caller
from tests.serving import serving


@contextlib.asynccontextmanager
async def two_replicas():
    ports = [free_port(), free_port()]
    peers = ",".join(f"127.0.0.1:{p}" for p in ports)
    async with contextlib.AsyncExitStack() as stack:
        replicas = []
        for port in ports:
            flags = ["--port", str(port), "--response-peers", peers]
            service = PipelineService(parser().parse_args(flags))
            target = await stack.enter_async_context(serving(service, parser(), *flags))
            channel = await stack.enter_async_context(grpc.aio.insecure_channel(target))
            replicas.append((service, responses_pb2_grpc.ResponsesServiceStub(channel)))
        yield replicas


def stored_on(service, text: str, owner: str | None = None) -> dict:
    output = [{"type": "reasoning", "content": [{"type": "reasoning_text", "text": text}]}]
    response = {"id": service.stored.name("resp_" + "5" * 32), "object": "response", "output": output}
    service.stored.store.put(response, [{"role": "user", "content": "hi"}], owner)
    return response


async def test_either_replica_answers_for_the_other():
    async with two_replicas() as [(first, first_stub), (second, second_stub)]:
        assert first.stored.tag != second.stored.tag
        response = stored_on(first, "from the first")
        for stub in (first_stub, second_stub):
            answer = await stub.GetResponse(responses_pb2.GetResponseRequest(response_id=response["id"]))
            assert json.loads(answer.data) == response
        # a turn on the second continues the first's conversation
        body = json.dumps({"input": "and?", "previous_response_id": response["id"]}).encode()
        turn = await responses_turn.begin(body, second.stored, Caller(None), 10.0)
        assert turn.input_items == [
            {"role": "user", "content": "hi"},
            *response["output"],
            {"role": "user", "content": "and?"},
        ]
        deleted = await second_stub.DeleteResponse(responses_pb2.DeleteResponseRequest(response_id=response["id"]))
        assert json.loads(deleted.data) == {"id": response["id"], "object": "response.deleted", "deleted": True}
        assert first.stored.store.get(response["id"]) is None
        for stub in (first_stub, second_stub):
            for call in (stub.GetResponse(responses_pb2.GetResponseRequest(response_id=response["id"])),
                         stub.DeleteResponse(responses_pb2.DeleteResponseRequest(response_id=response["id"]))):  # fmt: skip
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await call
                error = ServiceError.from_rpc_error(caught.value)
                assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "RESPONSE_NOT_FOUND")


async def test_ids_no_replica_holds_and_a_replay():
    async with two_replicas() as [(first, stub), _]:
        for response_id in ("resp_" + "f" * 32, "resp_", "chatcmpl-1", ""):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.GetResponse(responses_pb2.GetResponseRequest(response_id=response_id))
            assert ServiceError.from_rpc_error(caught.value).reason == "RESPONSE_NOT_FOUND", response_id
        response = stored_on(first, "x")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetResponse(responses_pb2.GetResponseRequest(response_id=response["id"], stream=True))
        assert ServiceError.from_rpc_error(caught.value).violations[0][0] == "stream"


async def test_under_api_keys_a_response_is_its_clients():
    """The gateway's identity headers (scaleout_common.identity) travel to the owner: another client's id is not
    found, on the replica that holds it and through the other one; an admin sees it."""
    async with two_replicas() as [(first, first_stub), (_, second_stub)]:
        response = stored_on(first, "bob's", owner="bob")
        request = responses_pb2.GetResponseRequest(response_id=response["id"])
        for stub in (first_stub, second_stub):
            for metadata in (((CLIENT_HEADER, "bob"),), ((CLIENT_HEADER, "ops"), (ADMIN_HEADER, "true"))):
                assert json.loads((await stub.GetResponse(request, metadata=metadata)).data) == response
            delete = responses_pb2.DeleteResponseRequest(response_id=response["id"])
            for call, asked in ((stub.GetResponse, request), (stub.DeleteResponse, delete)):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await call(asked, metadata=((CLIENT_HEADER, "alice"),))
                assert ServiceError.from_rpc_error(caught.value).reason == "RESPONSE_NOT_FOUND"
        assert first.stored.store.get(response["id"]) is not None


async def test_cancel_is_answered_by_the_owner_through_either_replica():
    """A finished background response is answered as it is (OpenAI's: cancelling twice returns the final one), any
    other stored response is not cancellable, another client's is not found: on the owner and through the other."""
    async with two_replicas() as [(first, first_stub), (_, second_stub)]:
        synchronous = stored_on(first, "answered in its call")
        background_id = first.stored.name("resp_" + "6" * 32)
        background = {"id": background_id, "object": "response", "background": True, "status": "completed"}
        first.stored.store.put(background, [], "bob")
        for stub in (first_stub, second_stub):
            answer = await stub.CancelResponse(responses_pb2.CancelResponseRequest(response_id=background["id"]))
            assert json.loads(answer.data) == background
            for response_id, metadata, reason in (
                (synchronous["id"], (), "RESPONSE_NOT_CANCELLABLE"),
                (background["id"], ((CLIENT_HEADER, "alice"),), "RESPONSE_NOT_FOUND"),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stub.CancelResponse(
                        responses_pb2.CancelResponseRequest(response_id=response_id), metadata=metadata
                    )
                error = ServiceError.from_rpc_error(caught.value)
                assert (error.reason, error.violations[0][0]) == (reason, "response_id")


async def test_calls_that_come_while_the_peers_resolve_wait_for_it_and_find_the_owner(monkeypatch):
    """Both followers of a resumed stream asked one replica at once for a tag it had not resolved yet: the second
    found the empty table within the resolve interval and answered NOT_FOUND (seen under CI's load)."""
    peers = Peers("127.0.0.1:5001,127.0.0.1:5002", 4)
    resolve = peers.fleet.replicas

    async def slowly():
        await asyncio.sleep(0.2)
        return await resolve()

    monkeypatch.setattr(peers.fleet, "replicas", slowly)
    stubs = await asyncio.gather(*(peers.stub(tag_of("127.0.0.1:5002")) for _ in range(3)))
    assert all(stub is not None for stub in stubs)
    assert await peers.stub(tag_of("127.0.0.1:9")) is None  # an unknown tag still is
    await peers.close()
