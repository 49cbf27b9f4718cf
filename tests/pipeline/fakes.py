"""Scripted engine and derender servers on loopback (no model), and a render that answers without one: the one-hop
routes over them, to see how each ends when a hop fails. Every fake call notes how it ended, so a test can tell
that no hop was left running."""

from __future__ import annotations

import asyncio
import contextlib
import json
import types
from dataclasses import dataclass, field
from typing import Any, cast

import grpc
from google.api import httpbody_pb2

from pipeline_svc.hops import Hops
from pipeline_svc.response_peers import Peers, StoredResponses
from pipeline_svc.response_store import ResponseStore
from pipeline_svc.responses_background import BackgroundRuns
from scaleout.v1 import derender_pb2, derender_pb2_grpc, engine_pb2, engine_pb2_grpc, render_pb2
from scaleout_common.errors import ServiceError

OUTPUT = engine_pb2.GenerateResponse(request_id="req", choices=[engine_pb2.GenerateChoice(index=0, token_ids=[7])])
FINISHED = engine_pb2.GenerateResponse(request_id="req", finished=True)
HANG = "hang"  # a step that waits until the call is cancelled


async def _end(context, failure: ServiceError | grpc.StatusCode) -> None:
    """End the call typed (a ServiceError) or untyped (a bare code, as Envoy or a dying replica ends it)."""
    if isinstance(failure, ServiceError):
        await context.abort_with_status(failure.to_rpc_status())
    await context.abort(failure, "the connection broke (fake)")


@dataclass
class Engine(engine_pb2_grpc.EngineServiceServicer):
    """Generate plays `script`: GenerateResponses, a pause (seconds), an Event to wait for, HANG, or a failure
    that ends the call."""

    script: list = field(default_factory=lambda: [OUTPUT, OUTPUT, FINISHED])
    running: asyncio.Event = field(default_factory=asyncio.Event)  # a call reached the fake
    starts: int = 0
    ends: list[str] = field(default_factory=list)  # per call: "done", "failed" or "cancelled"

    async def Generate(self, request, context):
        end = "cancelled"
        self.starts += 1
        self.running.set()
        try:
            for step in self.script:
                if step == HANG:
                    await asyncio.sleep(3600)
                elif isinstance(step, float):
                    await asyncio.sleep(step)  # a prefill
                elif isinstance(step, asyncio.Event):
                    await step.wait()
                elif isinstance(step, engine_pb2.GenerateResponse):
                    yield step
                    await asyncio.sleep(0.01)  # a decode step
                else:
                    end = "failed"
                    await _end(context, step)
            end = "done"
        finally:
            self.ends.append(end)


@dataclass
class Derender(derender_pb2_grpc.DerenderServiceServicer):
    """DerenderStream: one chunk per engine output (chat, or completion for a completion context); `refuse` ends
    the call before reading anything (once `refuse_after` is set), `fail_after` after that many outputs,
    `stop_after` matches a stop string there (stop_generation, then a closing chunk once the caller half-closes)."""

    refuse: ServiceError | grpc.StatusCode | None = None
    refuse_after: asyncio.Event | None = None
    fail_after: tuple[int, ServiceError | grpc.StatusCode] | None = None
    stop_after: int | None = None
    running: asyncio.Event = field(default_factory=asyncio.Event)
    starts: int = 0
    ends: list[str] = field(default_factory=list)

    async def DerenderStream(self, request_iterator, context):
        end, seen, completion = "cancelled", 0, False
        self.starts += 1
        self.running.set()
        try:
            if self.refuse is not None:
                if self.refuse_after is not None:
                    await self.refuse_after.wait()
                end = "failed"
                await _end(context, self.refuse)
            async for request in request_iterator:
                if request.HasField("context"):
                    completion = request.context.endpoint == derender_pb2.ENDPOINT_COMPLETION
                    continue
                if self.fail_after is not None and seen == self.fail_after[0]:
                    end = "failed"
                    await _end(context, self.fail_after[1])
                seen += 1
                finished = request.engine_output.finished
                stop = seen == self.stop_after
                yield _answer(completion, "tok", "stop" if finished or stop else None, stop)
                if finished:
                    break
            else:
                yield _answer(completion, "", None, False)  # the caller half-closed early: close the choices
            end = "done"
        finally:
            self.ends.append(end)


def _answer(completion: bool, text: str, finish: str | None, stop: bool) -> derender_pb2.DerenderStreamResponse:
    head = {"id": "cmpl-1", "created": 1700000000, "model": "smol"}
    if completion:
        choice = derender_pb2.CompletionChoice(index=0, text=text, finish_reason=finish or "")
        chunk = derender_pb2.Completion(object="text_completion", choices=[choice], **head)
        return derender_pb2.DerenderStreamResponse(completion=chunk, stop_generation=stop)
    delta = derender_pb2.ChatChunkChoice(index=0, delta=derender_pb2.ChatDelta(content=text))
    if finish:
        delta.finish_reason = finish
    chunk = derender_pb2.ChatCompletionChunk(object="chat.completion.chunk", choices=[delta], **head)
    return derender_pb2.DerenderStreamResponse(chat=chunk, stop_generation=stop)


def rendered(stop: list[str] | None = None, completion: bool = False) -> render_pb2.RenderChatResponse:
    out = render_pb2.RenderChatResponse()
    out.generate_request.request_id = "req"
    out.generate_request.token_ids.extend([1, 2, 3])
    ctx = out.derender_context
    ctx.id, ctx.created, ctx.model = "cmpl-1", 1700000000, "smol"
    ctx.endpoint = derender_pb2.ENDPOINT_COMPLETION if completion else derender_pb2.ENDPOINT_CHAT
    ctx.stop.extend(stop or [])
    return out


class Render:
    """render_svc's one-hop RPCs, answered without a model."""

    async def RenderChat(self, request, **_options):
        return rendered()

    RenderMessages = RenderResponses = RenderChat

    async def RenderCompletion(self, request, **_options):
        one = rendered(completion=True)
        prompt = render_pb2.RenderedCompletion(
            generate_request=one.generate_request, derender_context=one.derender_context
        )
        return render_pb2.RenderCompletionResponse(prompts=[prompt])


def stored_responses() -> StoredResponses:
    """A replica's stored Responses, alone (no peers)."""
    return StoredResponses(
        store := ResponseStore(16, 1 << 20, 60.0), Peers("", 4), BackgroundRuns(store, 4), "127.0.0.1:1"
    )


class Context:
    """The servicer context a route reads."""

    def time_remaining(self) -> float:
        return 30.0

    def invocation_metadata(self):
        return ()


def body(payload: dict) -> httpbody_pb2.HttpBody:
    return httpbody_pb2.HttpBody(content_type="application/json", data=json.dumps(payload).encode())


@contextlib.asynccontextmanager
async def hops_over(engine: Engine, derender: Derender):
    """Hops whose engine and derender are the fakes (on one loopback server) and whose render is `Render`."""
    server = grpc.aio.server()
    engine_pb2_grpc.add_EngineServiceServicer_to_server(engine, server)
    derender_pb2_grpc.add_DerenderServiceServicer_to_server(derender, server)
    target = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    await server.start()
    hops = Hops(
        types.SimpleNamespace(render_target=target, engine_target=target, derender_target=target, max_message_mb=4)
    )
    await hops.open()
    hops.render = cast(Any, Render())
    try:
        yield hops
    finally:
        await hops.close()
        await server.stop(0)


async def ended(*fakes: Engine | Derender) -> None:
    """Wait (bounded) until every call that reached a fake has ended (one the caller cancelled before it reached
    the fake never runs)."""
    await asyncio.sleep(0.02)
    for _ in range(200):
        if all(len(fake.ends) == fake.starts for fake in fakes):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"a hop call was left running: {[(fake.starts, fake.ends) for fake in fakes]}")
