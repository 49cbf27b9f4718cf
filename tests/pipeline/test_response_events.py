"""A streamed background Response's kept events (pipeline_svc/response_events.py): readers follow a live log from
any cursor to its end, none lost or twice; the log is stored with the Response while it fits the store; and
`GET ?stream=true` (ResponsesService.RetrieveResponse) answers them on either of two real pipeline replicas, with
its typed refusals. With the model, through Envoy and the SDK: tests/two_pipelines/test_responses_resume.py."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from pipeline_svc.response_events import EventLog
from pipeline_svc.response_store import ResponseStore
from pipeline_svc.responses_background import BackgroundRuns, Run
from pipeline_svc.responses_response import ResponseStream
from pipeline_svc.shaped_route import sse
from scaleout.v1 import responses_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.identity import CLIENT_HEADER
from tests.pipeline.test_api_shapes import _rendered
from tests.pipeline.test_response_peers import two_replicas


def event(number: int, text: str = "") -> tuple[str, dict]:
    name = "response.output_text.delta"
    return name, {"type": name, "sequence_number": number, "delta": text or f"piece {number}"}


def ended(count: int) -> EventLog:
    log = EventLog()
    log.add([event(n) for n in range(count)])
    log.end()
    return log


async def _read(log: EventLog, starting_after: int | None) -> list[bytes]:
    return [body.data async for body in log.follow(starting_after)]


async def test_readers_follow_a_live_log_from_any_cursor_to_its_end():
    log = EventLog()
    log.add([event(0), event(1)])
    readers = [asyncio.create_task(_read(log, after)) for after in (None, 0, 1)]
    for number in range(2, 7):
        await asyncio.sleep(0)  # the readers catch up and wait
        log.add([event(number)])
    log.add([event(7), event(8)])  # two at once
    log.end()
    sent = [sse(event(n)).data for n in range(9)]
    assert await asyncio.wait_for(asyncio.gather(*readers), 5) == [sent, sent[1:], sent[2:]]
    assert await _read(log, 8) == [] and log.bytes == sum(map(len, sent))  # the last one read: nothing more


@pytest.mark.parametrize(("count", "after"), [(3, 3), (3, -1), (0, 0), (3, 2**31 - 1)])
async def test_a_cursor_past_the_events_sent_is_out_of_range(count, after):
    log = ended(count)
    with pytest.raises(ServiceError) as caught:
        await _read(log, after)
    assert (caught.value.reason, caught.value.violations[0][0]) == ("STARTING_AFTER_OUT_OF_RANGE", "starting_after")


def _streamed_run(store: ResponseStore) -> Run:
    shape = ResponseStream(_rendered("resp_"), {"input": "hi", "background": True, "stream": True})
    return Run(BackgroundRuns(store, 1), shape, ["hi"], None, True)


def test_a_runs_events_are_stored_with_its_last_response_while_they_fit():
    store = ResponseStore(max_count=4, max_bytes=8192, ttl_s=60)
    run = _streamed_run(store)
    run._send([event(0), event(1)])
    run._end(run.response | {"status": "completed"})
    stored, events = store.get(run.id), run.events
    assert stored is not None and events is not None and stored.events is events and events.ended
    assert stored.size > events.bytes > 0

    big = _streamed_run(store)
    big._send([event(n, "x" * 1000) for n in range(9)])  # ~9 kB of events: more than the store
    big._end(big.response | {"status": "completed"})
    stored = store.get(big.id)
    assert stored is not None and stored.events is None and stored.response["status"] == "completed"


def _stored_background(service, events: EventLog | None, owner: str | None = None) -> dict:
    response = {"id": service.stored.name("resp_" + "7" * 32), "object": "response", "background": True}
    service.stored.store.put(response, [], owner, events)
    return response


async def _events(stub, response_id: str, metadata=(), **fields) -> list[bytes]:
    request = responses_pb2.GetResponseRequest(response_id=response_id, **fields)
    return [body.data async for body in stub.RetrieveResponse(request, metadata=metadata)]


async def _refused(stub, response_id: str, metadata=(), **fields) -> tuple[str, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _events(stub, response_id, metadata, **fields)
    error = ServiceError.from_rpc_error(caught.value)
    return error.reason, error.violations[0][0]


async def test_either_replica_replays_the_owners_events():
    async with two_replicas() as [(first, first_stub), (_, second_stub)]:
        response = _stored_background(first, ended(5), owner="bob")
        sent = [sse(event(n)).data for n in range(5)]
        bob = ((CLIENT_HEADER, "bob"),)
        for stub in (first_stub, second_stub):
            assert await _events(stub, response["id"], bob, stream=True) == sent
            assert await _events(stub, response["id"], bob, stream=True, starting_after=2) == sent[3:]
            assert await _events(stub, response["id"], bob, stream=True, starting_after=4) == []
            [whole] = await _events(stub, response["id"], bob)  # no stream: the Response, as GetResponse answers
            assert json.loads(whole) == response
            refused = await _refused(stub, response["id"], bob, stream=True, starting_after=5)
            assert refused == ("STARTING_AFTER_OUT_OF_RANGE", "starting_after")
            other = await _refused(stub, response["id"], ((CLIENT_HEADER, "alice"),), stream=True)
            assert other == ("RESPONSE_NOT_FOUND", "response_id")


async def test_what_cannot_be_streamed_is_refused_by_name():
    async with two_replicas() as [(first, first_stub), (_, second_stub)]:
        polled = _stored_background(first, None)  # background, not streamed (or its events did not fit)
        synchronous = {"id": first.stored.name("resp_" + "8" * 32), "object": "response", "background": False}
        first.stored.store.put(synchronous, [])
        for stub in (first_stub, second_stub):
            for response in (polled, synchronous):
                assert await _refused(stub, response["id"], stream=True) == ("RESPONSE_NOT_STREAMABLE", "stream")
            assert await _refused(stub, "resp_" + "f" * 32, stream=True) == ("RESPONSE_NOT_FOUND", "response_id")
            for fields, name in (
                ({"starting_after": 1}, "starting_after"),
                ({"include_obfuscation": False}, "include_obfuscation"),
                ({"stream": True, "include_obfuscation": True}, "include_obfuscation"),
            ):
                assert await _refused(stub, polled["id"], **fields) == ("UNSUPPORTED_FIELD", name)
