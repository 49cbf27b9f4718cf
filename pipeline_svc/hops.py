"""The three hops every one-hop route makes: render, then generate, then derender.

`Hops` holds the stubs (direct, or through the gateway for balancing and health checks). `generate` runs a
rendered prompt to the end; `LiveGeneration` pipes the engine's stream through derender's stateful stream,
cancelling the engine (which aborts the request and frees its cache) as soon as derender reports a matched
stop string, which only derender can see. Deadlines propagate: each hop gets the caller's remaining time.
Engine calls carry render's prefix hash as a header, on which the gateway picks the replica that caches it.
"""

from __future__ import annotations

import asyncio
import contextlib

import grpc

from pipeline_svc import beam_search
from pipeline_svc.beam_search import Beam
from scaleout.v1 import derender_pb2, derender_pb2_grpc, engine_pb2, engine_pb2_grpc, render_pb2_grpc
from scaleout_common import prefix_hash
from scaleout_common.channels import open_channel
from scaleout_common.errors import ServiceError, untyped_reason
from scaleout_common.reasons import Reason, fail

# gRPC's aio client sets this status on a call that ended while it was being written to (LiveGeneration).
WRITE_RACE_DETAILS = "Internal error from Core"


class Hops:
    def __init__(self, args):
        self._args = args
        self._channels: list[grpc.aio.Channel] = []
        self.channels: dict[str, grpc.aio.Channel] = {}  # role -> its channel, once open
        self._eos: frozenset[int] | None = None  # the model's end-of-sequence ids (beam search's), once asked

    def _channel(self, target: str) -> grpc.aio.Channel:
        channel = open_channel(target, self._args.max_message_mb)
        self._channels.append(channel)
        return channel

    async def open(self) -> None:
        args = self._args
        self.channels = {
            "render": self._channel(args.render_target),
            "engine": self._channel(args.engine_target),
            "derender": self._channel(args.derender_target),
        }
        self.render = render_pb2_grpc.RenderServiceStub(self.channels["render"])
        self.engine = engine_pb2_grpc.EngineServiceStub(self.channels["engine"])
        self.derender = derender_pb2_grpc.DerenderServiceStub(self.channels["derender"])

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()

    async def outputs(self, rendered, beam: Beam | None, context) -> list:
        """The engine's outputs for one rendered prompt: generated, or the beams of vLLM's beam search."""
        if beam is None:
            return await self.generate(rendered, context)
        if self._eos is None:
            info = await self.engine.GetModelInfo(engine_pb2.GetModelInfoRequest(), timeout=context.time_remaining())
            self._eos = frozenset(info.eos_token_ids)
        return await beam_search.generate(self.engine, rendered, beam, self._eos, context)

    async def generate(self, rendered, context) -> list:
        """The engine's outputs for one rendered prompt (live when stop strings or patterns need derender to end it)."""
        if rendered.derender_context.stop or rendered.derender_context.stop_regex:
            live = LiveGeneration(self, rendered, context)
            async for _ in live.answers():
                pass
            return live.outputs
        result = await self.engine.GenerateUnary(
            rendered.generate_request,
            timeout=context.time_remaining(),
            metadata=prefix_hash.routing_metadata(rendered.generate_request),
        )
        if result.HasField("error"):
            raise ServiceError.from_status(result.error)
        return [result]

    async def complete(self, rendered, context) -> tuple[derender_pb2.ChatCompletion, list]:
        """A rendered chat prompt generated to the end and derendered whole (the unary one hop), and the engine's
        outputs it was derendered from."""
        results = await self.generate(rendered, context)
        completion = await self.derender.DerenderChat(
            derender_pb2.DerenderChatRequest(context=rendered.derender_context, results=results),
            timeout=context.time_remaining(),
        )
        return completion, results


class LiveGeneration:
    """The engine's stream piped through derender's stateful stream for one rendered prompt.

    Two calls run at once: `_pump` reads the engine and writes each message to derender, `answers` reads
    derender. The first hop to fail decides the outcome (`answers` raises it, typed: the hop's status or the
    engine's in-band error) and both calls are cancelled at once, so no hop is left running; the other hop's
    failures after that are consequences, never the cause. A stop string that derender matched cancels the engine
    and half-closes derender, which then closes the choices. `outputs` keeps the engine messages forwarded.

    A write never decides the outcome. gRPC's aio client answers a write to a call that has just ended by setting
    the call's status to INTERNAL "Internal error from Core" over the status the server sent (grpc/grpc#36066,
    grpcio 1.85; the server's status never came back in 55 of 55 such races measured through Envoy). So nothing
    is written to derender before the engine's first output (a replica that refuses the stream has answered by
    then, and its status is read whole) nor after its call ended, and a status lost to a race all the same is
    derender's call ending, untyped UNAVAILABLE.
    """

    def __init__(self, hops: Hops, rendered, context):
        self._rendered = rendered
        self._engine_call = hops.engine.Generate(
            rendered.generate_request,
            timeout=context.time_remaining(),
            metadata=prefix_hash.routing_metadata(rendered.generate_request),
        )
        self._derender_call = hops.derender.DerenderStream(timeout=context.time_remaining())
        self._stopped_early = False  # derender matched a stop string: the engine call is cancelled
        self._failed = False  # a hop failed: both calls are cancelled, `_failure` says why
        self._failure: ServiceError | None = None
        self.outputs: list = []

    def _fail(self) -> bool:
        """True for the first hop to fail, whose failure is the outcome; both calls are cancelled."""
        if self._failed:
            return False
        self._failed = True
        self._engine_call.cancel()
        self._derender_call.cancel()
        return True

    def _cancelled_here(self) -> bool:
        """Whether a CancelledError comes from a call cancelled here, not from the task's own cancellation."""
        task = asyncio.current_task()
        return (self._failed or self._stopped_early) and not (task is not None and task.cancelling())

    async def _write(self, request: derender_pb2.DerenderStreamRequest) -> bool:
        """One message to derender; False once its call has ended (the reader reports why)."""
        call = self._derender_call
        if self._failed or call.done():
            return False
        try:
            await call.write(request)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            return False
        return True

    async def _pump(self) -> None:
        """The engine's messages to derender, then derender half-closed (it closes the choices and ends)."""
        context = derender_pb2.DerenderStreamRequest(context=self._rendered.derender_context)
        finished = False
        try:
            async for output in self._engine_call:
                if output.HasField("error"):
                    if self._fail():
                        self._failure = ServiceError.from_status(output.error)
                    return
                self.outputs.append(output)
                # The context goes with the first output (class docstring): derender's session setup, ~35 us
                # (the default model's tokenizer, two busy cores), moves onto the first token's path.
                if context is not None and not await self._write(context):
                    return
                context = None
                if not await self._write(derender_pb2.DerenderStreamRequest(engine_output=output)):
                    return
                finished = output.finished
            if not finished and not self._stopped_early and self._fail():
                self._failure = fail(Reason.UPSTREAM_LOST, "the engine stream ended without its terminal message")
                return
        except grpc.aio.AioRpcError as error:
            if not self._stopped_early and self._fail():
                self._failure = ServiceError.from_rpc_error(error)
                return
        except asyncio.CancelledError:
            if not self._cancelled_here():
                raise
        if not self._failed:
            # Should derender's call have ended meanwhile, the reader reports why.
            with contextlib.suppress(grpc.aio.AioRpcError, grpc.aio.InternalError):
                await self._derender_call.done_writing()

    def _derender_failure(self, error: grpc.aio.AioRpcError) -> ServiceError:
        """Derender's failed call as the outcome; a write that raced its end hid why it ended (class docstring)."""
        if error.code() == grpc.StatusCode.INTERNAL and error.details() == WRITE_RACE_DETAILS:
            code = grpc.StatusCode.UNAVAILABLE
            message = "the derender stream ended while the pipeline was writing to it"
            return ServiceError(code, untyped_reason(code), message, typed=False)
        return ServiceError.from_rpc_error(error)

    async def answers(self):
        """Derender's answers (DerenderStreamResponse) as they come; then the first hop failure, raised."""
        pump = asyncio.create_task(self._pump())
        try:
            try:
                async for answer in self._derender_call:
                    yield answer
                    if answer.stop_generation and not self._stopped_early:
                        self._stopped_early = True
                        self._engine_call.cancel()
            except grpc.aio.AioRpcError as error:
                if self._fail():
                    self._failure = self._derender_failure(error)
            except asyncio.CancelledError:
                if not self._cancelled_here():
                    raise
            await pump
        finally:
            for task_or_call in (pump, self._engine_call, self._derender_call):
                task_or_call.cancel()
        if self._failure is not None:
            raise self._failure


def broken_off(error: grpc.RpcError | ServiceError) -> ServiceError:
    """A started stream's failure as its in-band error: a status its service typed passes on as it is; an
    untyped one (Envoy resets a stream whose replica died or whose connection broke) is UPSTREAM_LOST."""
    failure = ServiceError.of(error)
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
