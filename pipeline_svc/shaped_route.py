"""A one-hop route whose API is not chat's but is rendered as chat: Anthropic Messages, OpenAI Responses.

The client's JSON goes unchanged to the API's own render RPC (render_svc converts it to the chat form and
enforces its field policy), then the usual hops run: the engine, and derender's chat output, the same parsed
text, reasoning and tool calls the chat routes serve. Only the last step differs per API: a `Shape` turns
derender's typed ChatCompletion (unary) or ChatCompletionChunks (streamed) into that API's JSON or events.

Unary: one `application/json` HttpBody. Streamed: one HttpBody per server-sent event (`event:` and `data:`
lines), the first written together with the first output derender answers, so that a failure before it (a
refused request, a full engine queue, a replica still loading) is still a typed status and an HTTP error. After the first byte, errors
travel in-band as the API's error events (`hops.broken_off`: the upstream's typed status, or UPSTREAM_LOST).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import grpc
from google.api import httpbody_pb2
from opentelemetry import trace

from pipeline_svc.hops import Hops, LiveGeneration, broken_off
from scaleout.v1 import derender_pb2, engine_pb2, render_pb2
from scaleout_common.errors import ServiceError

JSON, SSE = "application/json", "text/event-stream"
Event = tuple[str, dict]  # (SSE event name, JSON payload)


class StreamShape(Protocol):
    def start(self) -> list[Event]: ...
    def chunk(self, chunk: derender_pb2.ChatCompletionChunk) -> list[Event]: ...
    def finish(self) -> list[Event]: ...
    def error(self, failure: ServiceError) -> list[Event]: ...


@runtime_checkable
class CountsPrompt(Protocol):
    """A stream shape whose opening events report the prompt's tokens as the engine counted them (cached ones
    included, which only the engine's first output carries: derender's chunks carry usage only at the end)."""

    def counted(self, prompt: engine_pb2.PromptInfo) -> None: ...


@runtime_checkable
class ReadsOutputs(Protocol):
    """A shape whose last events report something of the engine's outputs (the Responses API's per-request
    `metrics`, from their timings): given them all just before `finish` (unary: the `outputs` argument)."""

    def generated(self, outputs: list[engine_pb2.GenerateResponse]) -> None: ...


def json_body(payload: dict | list) -> httpbody_pb2.HttpBody:
    return httpbody_pb2.HttpBody(content_type=JSON, data=json.dumps(payload, ensure_ascii=False).encode())


def sse(event: Event) -> httpbody_pb2.HttpBody:
    name, payload = event
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return httpbody_pb2.HttpBody(content_type=SSE, data=f"event: {name}\ndata: {data}\n\n".encode())


async def render(render_rpc, request: httpbody_pb2.HttpBody, context, identity, echo: dict | None = None):
    """The API's own render RPC, and the request as the answer echoes it (default: the body as sent), its
    identity fields set on the request's span."""
    try:
        rendered = await render_rpc(request, timeout=context.time_remaining())
    except grpc.aio.AioRpcError as error:
        raise ServiceError.from_rpc_error(error) from None
    body = echo if echo is not None else json.loads(request.data)  # render validated it
    span = trace.get_current_span()
    for name, value in identity(body).items():
        span.set_attribute(name, value)
    return rendered, body


async def serve(
    hops: Hops,
    render_rpc,
    request: httpbody_pb2.HttpBody,
    context,
    unary: Callable[
        [derender_pb2.ChatCompletion, render_pb2.RenderChatResponse, dict, list[engine_pb2.GenerateResponse]], dict
    ],
    streamed: Callable[[render_pb2.RenderChatResponse, dict], StreamShape],
    identity: Callable[[dict], dict[str, str]],
    echo: dict | None = None,
):
    """Render (the API's own render RPC), then the answer as one JSON body or the API's event stream. The shapes
    see `echo`, the request as the answer echoes it (default: the body as sent); `unary` also the engine's outputs."""
    rendered, body = await render(render_rpc, request, context, identity, echo)
    if not body.get("stream"):
        try:
            completion, outputs = await hops.complete(rendered, context)
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None
        yield json_body(unary(completion, rendered, body, outputs))
        return
    async for event in events(hops, rendered, streamed(rendered, body), context):
        yield sse(event)


async def events(hops: Hops, rendered: render_pb2.RenderChatResponse, shape: StreamShape, context):
    """The shape's events for one rendered prompt. A failure before the first event raises, typed; after it, the
    shape's error events end the stream."""
    started = False
    try:
        live = LiveGeneration(hops, rendered, context)
        async for answer in live.answers():
            chunk_events = shape.chunk(answer.chat)
            if chunk_events and not started:  # a chunk without output (usage only) starts nothing yet
                chunk_events, started = _start(shape, live) + chunk_events, True
            for event in chunk_events:
                yield event
        opening = [] if started else _start(shape, live)
        started = True
        if isinstance(shape, ReadsOutputs):
            shape.generated(live.outputs)
        for event in opening + shape.finish():
            yield event
    except (grpc.aio.AioRpcError, ServiceError) as error:
        if not started:
            raise ServiceError.of(error) from None
        # HTTP/1.1 clients never see trailers: the outcome travels in-band.
        for event in shape.error(broken_off(error)):
            yield event


def _start(shape: StreamShape, live: LiveGeneration) -> list[Event]:
    """The shape's opening events, written once derender answered: the engine's first output came before."""
    if isinstance(shape, CountsPrompt) and live.outputs:
        shape.counted(live.outputs[0].prompt)
    return shape.start()
