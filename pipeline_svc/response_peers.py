"""Stored responses across pipeline replicas: an id names the replica that stored it, and any replica finds it.

A response id is `resp_` + the storing replica's tag (8 hex digits of the SHA-256 of its `ip:port` as its peers
resolve it: --response-advertise, by default --host and the port it listens on) + render's random suffix. A
replica asked for an id looks in its own store when the tag is its own; otherwise it looks the tag up among its
peers (--response-peers, resolved as pipeline_svc/fleet.py resolves --engines: a name stands for every address
it has, e.g. a Kubernetes headless Service's pods) and asks that replica over ResponseStoreService, which answers
from its own store only. A tag no peer has (a replica gone, its memory with it) is RESPONSE_NOT_FOUND. Only
listed peers are ever called, so an id cannot point a replica at an address of the client's choosing.

A background response runs in the replica that took it (responses_background.py), the one its id names: a
cancel, or a delete (which cancels it first), goes to that replica like any other call for the id, and so does a
streamed one's `GET ?stream=true` (response_events), whose events that replica streams and any other relays.

Under API keys a response is its storing client's (and admins'): the call to the owner carries the caller's
identity as the gateway set it (scaleout_common.identity), and another client's id is RESPONSE_NOT_FOUND, as if
it did not exist.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator

import grpc
from google.api import httpbody_pb2

from pipeline_svc.fleet import Engines, Fleet, Replica
from pipeline_svc.response_events import streamable
from pipeline_svc.response_store import ResponseStore, Stored
from pipeline_svc.responses_background import BackgroundRuns
from scaleout.v1 import responses_pb2, responses_pb2_grpc
from scaleout_common.errors import ServiceError
from scaleout_common.identity import Caller, caller
from scaleout_common.reasons import Reason, fail

PREFIX, TAG_CHARS = "resp_", 8
RESOLVE_EVERY_S = 1.0  # an unknown tag resolves the peers' names again, at most this often


def tag_of(address: str) -> str:
    return hashlib.sha256(address.encode()).hexdigest()[:TAG_CHARS]


def not_found(response_id: str, field: str) -> ServiceError:
    return fail(Reason.RESPONSE_NOT_FOUND, f"Response with id '{response_id}' not found.", field)


class Peers:
    """The pipeline replicas the --response-peers list resolves to (pipeline_svc/fleet.py), by tag."""

    def __init__(self, spec: str, max_message_mb: int):
        self.fleet = Fleet(Engines.parse(spec), max_message_mb)
        self._by_tag: dict[str, Replica] = {}
        self._resolved_at = -RESOLVE_EVERY_S
        # One resolution at a time, which the calls for an unknown tag wait for: one that came while another
        # resolved would otherwise find the old table within RESOLVE_EVERY_S and answer NOT_FOUND.
        self._resolving = asyncio.Lock()

    async def stub(self, tag: str) -> responses_pb2_grpc.ResponseStoreServiceStub | None:
        if tag not in self._by_tag:
            async with self._resolving:
                if tag not in self._by_tag and time.monotonic() - self._resolved_at >= RESOLVE_EVERY_S:
                    replicas, _ = await self.fleet.replicas()
                    self._by_tag = {tag_of(replica.address): replica for replica in replicas}
                    self._resolved_at = time.monotonic()
        replica = self._by_tag.get(tag)
        return None if replica is None else self.fleet.stub(replica, responses_pb2_grpc.ResponseStoreServiceStub)

    async def close(self) -> None:
        await self.fleet.close()


class StoredResponses:
    """This replica's store and its peers': keep a response here, find or forget it wherever it was stored."""

    def __init__(self, store: ResponseStore, peers: Peers, runs: BackgroundRuns, advertise: str = ""):
        self.store, self.peers, self.runs = store, peers, runs
        self.tag = tag_of(advertise) if advertise else ""

    def listening(self, host: str, port: int) -> None:
        """The replica's own tag, from the address it listens on unless --response-advertise named it."""
        self.tag = self.tag or tag_of(f"{host}:{port}")

    def name(self, render_id: str) -> str:
        """Render's response id, renamed for this replica."""
        suffix = render_id.removeprefix(PREFIX)
        return PREFIX + self.tag + suffix[TAG_CHARS:]

    async def find(self, response_id: str, field: str, who: Caller, time_left: float | None) -> Stored:
        if self._mine(response_id):
            return owned(self.store, response_id, who, field)
        stub = await self._owner(response_id, field)
        try:
            answer = await stub.FetchStoredResponse(
                responses_pb2.FetchStoredResponseRequest(response_id=response_id),
                timeout=time_left,
                metadata=who.metadata(),
            )
        except grpc.aio.AioRpcError as error:
            raise _at_owner(error, response_id, field) from None
        response, items = json.loads(answer.response_json), json.loads(answer.input_items_json)
        return Stored(response, items, 0, 0.0)

    async def forget(self, response_id: str, who: Caller, time_left: float | None) -> None:
        if self._mine(response_id):
            await forget_here(self.store, self.runs, response_id, who)
            return
        stub = await self._owner(response_id, "response_id")
        request = responses_pb2.DeleteStoredResponseRequest(response_id=response_id)
        try:
            await stub.DeleteStoredResponse(request, timeout=time_left, metadata=who.metadata())
        except grpc.aio.AioRpcError as error:
            raise _at_owner(error, response_id, "response_id") from None

    async def cancel(self, response_id: str, who: Caller, time_left: float | None) -> dict:
        """Cancel a background response wherever it runs; the Response as it ended."""
        if self._mine(response_id):
            return await cancel_here(self.store, self.runs, response_id, who)
        stub = await self._owner(response_id, "response_id")
        request = responses_pb2.CancelStoredResponseRequest(response_id=response_id)
        try:
            answer = await stub.CancelStoredResponse(request, timeout=time_left, metadata=who.metadata())
        except grpc.aio.AioRpcError as error:
            raise _at_owner(error, response_id, "response_id") from None
        return json.loads(answer.response_json)

    async def events(
        self, request: responses_pb2.GetResponseRequest, who: Caller, time_left: float | None
    ) -> AsyncIterator[httpbody_pb2.HttpBody]:
        """A streamed background response's events after `request.starting_after`, wherever it is stored or runs:
        a finished one's replayed, a running one's followed to its last."""
        if self._mine(request.response_id):
            async for body in events_here(self.store, self.runs, request, who):
                yield body
            return
        stub = await self._owner(request.response_id, "response_id")
        call = stub.StreamStoredResponse(request, timeout=time_left, metadata=who.metadata())
        try:
            async for body in call:
                yield body
        except grpc.aio.AioRpcError as error:
            raise _at_owner(error, request.response_id, "response_id") from None
        finally:
            call.cancel()  # the reader left: the owner stops streaming

    def _mine(self, response_id: str) -> bool:
        return response_id.startswith(PREFIX + self.tag)

    async def _owner(self, response_id: str, field: str) -> responses_pb2_grpc.ResponseStoreServiceStub:
        tag = response_id.removeprefix(PREFIX)[:TAG_CHARS]
        stub = await self.peers.stub(tag) if response_id.startswith(PREFIX) else None
        if stub is None:
            raise not_found(response_id, field)
        return stub


def owned(store: ResponseStore, response_id: str, who: Caller, field: str) -> Stored:
    """The stored response, if `who` may see it."""
    stored = store.get(response_id)
    if stored is None or not who.owns(stored.owner):
        raise not_found(response_id, field)
    return stored


async def cancel_here(store: ResponseStore, runs: BackgroundRuns, response_id: str, who: Caller) -> dict:
    """This replica's own response: a running background one cancelled, a finished one as it is (OpenAI's:
    cancelling twice answers the final Response), any other RESPONSE_NOT_CANCELLABLE."""
    run = runs.running(response_id)
    if run is not None and who.owns(run.owner):
        return await run.cancel()
    stored = owned(store, response_id, who, "response_id")
    if not stored.response.get("background"):
        raise fail(Reason.RESPONSE_NOT_CANCELLABLE, "Cannot cancel a synchronous response.", "response_id")
    return stored.response


def events_here(
    store: ResponseStore, runs: BackgroundRuns, request: responses_pb2.GetResponseRequest, who: Caller
) -> AsyncIterator[httpbody_pb2.HttpBody]:
    """This replica's own response's events after the request's cursor: a running one's live log, else the one
    stored with it."""
    run = runs.running(request.response_id)
    if run is not None and who.owns(run.owner):
        log = streamable(run.response, run.events)
    else:
        stored = owned(store, request.response_id, who, "response_id")
        log = streamable(stored.response, stored.events)
    return log.follow(request.starting_after if request.HasField("starting_after") else None)


async def forget_here(store: ResponseStore, runs: BackgroundRuns, response_id: str, who: Caller) -> None:
    """Delete this replica's own response, a running background one cancelled first."""
    run = runs.running(response_id)
    if run is not None and who.owns(run.owner):
        await run.cancel()
    owned(store, response_id, who, "response_id")
    store.delete(response_id)


def _at_owner(error: grpc.aio.AioRpcError, response_id: str, field: str) -> ServiceError:
    """The owner's answer in the caller's terms: its NOT_FOUND names the caller's field."""
    if error.code() == grpc.StatusCode.NOT_FOUND:
        return not_found(response_id, field)
    return ServiceError.from_rpc_error(error)


class ResponseStoreFrontDoor(responses_pb2_grpc.ResponseStoreServiceServicer):
    """ResponseStoreService: what this replica itself stored or runs (peers ask here; nothing is forwarded on)."""

    def __init__(self, store: ResponseStore, runs: BackgroundRuns):
        self.store, self.runs = store, runs

    async def FetchStoredResponse(self, request, context):
        stored = owned(self.store, request.response_id, caller(context), "response_id")
        return responses_pb2.StoredResponse(
            response_json=json.dumps(stored.response, ensure_ascii=False),
            input_items_json=json.dumps(stored.input_items, ensure_ascii=False),
        )

    async def DeleteStoredResponse(self, request, context):
        await forget_here(self.store, self.runs, request.response_id, caller(context))
        return responses_pb2.DeleteStoredResponseResponse()

    async def StreamStoredResponse(self, request, context):
        async for body in events_here(self.store, self.runs, request, caller(context)):
            yield body

    async def CancelStoredResponse(self, request, context):
        response = await cancel_here(self.store, self.runs, request.response_id, caller(context))
        return responses_pb2.StoredResponse(response_json=json.dumps(response, ensure_ascii=False))
