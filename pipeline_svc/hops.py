"""The three hops every one-hop route makes: render, then generate, then derender.

`Hops` holds the stubs (direct, or through the gateway for balancing and health checks). `generate` runs a
rendered prompt to the end; `LiveGeneration` pipes the engine's stream through derender's stateful stream,
cancelling the engine (which aborts the request and frees its cache) as soon as derender reports a matched
stop string, which only derender can see. Deadlines propagate: each hop gets the caller's remaining time.
Engine calls carry render's prefix hash as a header, on which the gateway picks the replica that caches it.
"""

from __future__ import annotations

import asyncio

import grpc

from scaleout.v1 import derender_pb2, derender_pb2_grpc, engine_pb2_grpc, render_pb2_grpc
from scaleout_common import prefix_hash
from scaleout_common.channels import open_channel
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail


class Hops:
    def __init__(self, args):
        self._args = args
        self._channels: list[grpc.aio.Channel] = []

    def _channel(self, target: str) -> grpc.aio.Channel:
        channel = open_channel(target, self._args.max_message_mb)
        self._channels.append(channel)
        return channel

    async def open(self) -> None:
        self.render = render_pb2_grpc.RenderServiceStub(self._channel(self._args.render_target))
        self.engine = engine_pb2_grpc.EngineServiceStub(self._channel(self._args.engine_target))
        self.derender = derender_pb2_grpc.DerenderServiceStub(self._channel(self._args.derender_target))

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()

    async def generate(self, rendered, context) -> list:
        """The engine's outputs for one rendered prompt (live when stop strings need derender to end it)."""
        if rendered.derender_context.stop:
            live = LiveGeneration(self, rendered, context)
            async for _ in live.answers():
                pass
            if live.engine_error is not None:
                raise ServiceError.from_status(live.engine_error)
            return live.outputs
        result = await self.engine.GenerateUnary(
            rendered.generate_request,
            timeout=context.time_remaining(),
            metadata=prefix_hash.routing_metadata(rendered.generate_request),
        )
        if result.HasField("error"):
            raise ServiceError.from_status(result.error)
        return [result]

    async def complete(self, rendered, context) -> derender_pb2.ChatCompletion:
        """A rendered chat prompt generated to the end and derendered whole (the unary one hop)."""
        results = await self.generate(rendered, context)
        return await self.derender.DerenderChat(
            derender_pb2.DerenderChatRequest(context=rendered.derender_context, results=results),
            timeout=context.time_remaining(),
        )


class LiveGeneration:
    """The engine's stream piped through derender's stateful stream for one rendered prompt.

    `outputs` keeps the engine messages that were forwarded; an in-band engine error ends the stream and
    lands in `engine_error`.
    """

    def __init__(self, hops: Hops, rendered, context):
        self._rendered = rendered
        self._engine_call = hops.engine.Generate(
            rendered.generate_request,
            timeout=context.time_remaining(),
            metadata=prefix_hash.routing_metadata(rendered.generate_request),
        )
        self._derender_call = hops.derender.DerenderStream(timeout=context.time_remaining())
        self._stopped_early = False
        self.outputs: list = []
        self.engine_error = None

    async def _pump(self) -> None:
        derender = self._derender_call
        try:
            await derender.write(derender_pb2.DerenderStreamRequest(context=self._rendered.derender_context))
            async for output in self._engine_call:
                if output.HasField("error"):
                    self.engine_error = output.error
                    break
                self.outputs.append(output)
                await derender.write(derender_pb2.DerenderStreamRequest(engine_output=output))
        except asyncio.CancelledError:
            if not self._stopped_early:
                raise
        finally:
            await derender.done_writing()

    async def answers(self):
        """Derender's answers (DerenderStreamResponse) as they come."""
        pump = asyncio.create_task(self._pump())
        try:
            async for answer in self._derender_call:
                yield answer
                if answer.stop_generation and not self._stopped_early:
                    self._stopped_early = True
                    self._engine_call.cancel()
            await pump
        finally:
            for task_or_call in (pump, self._engine_call, self._derender_call):
                task_or_call.cancel()


def broken_off(error: grpc.RpcError) -> ServiceError:
    """A started stream's failed call as its in-band error: a status its service typed passes on as it is; an
    untyped one (Envoy resets a stream whose replica died or whose connection broke) is UPSTREAM_LOST."""
    failure = ServiceError.from_rpc_error(error)
    if failure.typed:
        return failure
    return fail(Reason.UPSTREAM_LOST, f"the stream broke off after it started ({failure.code.name}: {failure.message})")


def rpc_errors_typed(function):
    """A downstream hop's typed error passes on unchanged (code, reason, violations)."""

    async def wrapper(*args, **kwargs):
        try:
            return await function(*args, **kwargs)
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None

    return wrapper
