"""ChatService: one-hop OpenAI-compatible chat (render -> generate -> derender) over the three services.

It holds no model: it forwards render's output to the engine unchanged and streams engine output through
derender's stateful stream, aborting the engine early when derender reports a matched stop string.
Deadlines propagate (each hop gets the caller's remaining time); a cancelled call cancels its hops.
"""

from __future__ import annotations

import asyncio

import grpc

from scaleout.v1 import chat_pb2, chat_pb2_grpc, derender_pb2, derender_pb2_grpc, engine_pb2_grpc, render_pb2_grpc
from scaleout_common.channels import open_channel
from scaleout_common.config import server_parser
from scaleout_common.errors import ServiceError
from scaleout_common.server import run

SERVICE_NAME = chat_pb2.DESCRIPTOR.services_by_name["ChatService"].full_name


class ChatPipeline(chat_pb2_grpc.ChatServiceServicer):
    service_names = (SERVICE_NAME,)

    def __init__(self, args):
        self._args = args
        self._channels: list[grpc.aio.Channel] = []

    def register(self, server: grpc.aio.Server) -> None:
        chat_pb2_grpc.add_ChatServiceServicer_to_server(self, server)

    def _channel(self, target: str) -> grpc.aio.Channel:
        channel = open_channel(target, self._args.max_message_mb)
        self._channels.append(channel)
        return channel

    async def load(self) -> None:
        self.render = render_pb2_grpc.RenderServiceStub(self._channel(self._args.render_target))
        self.engine = engine_pb2_grpc.EngineServiceStub(self._channel(self._args.engine_target))
        self.derender = derender_pb2_grpc.DerenderServiceStub(self._channel(self._args.derender_target))

    async def drain(self) -> None:
        pass

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()

    async def CreateChatCompletion(self, request, context):
        try:
            rendered = await self.render.RenderChat(request, timeout=context.time_remaining())
            if rendered.derender_context.stop:
                # Stop strings: generate live so the engine stops as soon as one matches, then derender the lot.
                live = LiveGeneration(self, rendered, context)
                async for _ in live.answers():
                    pass
                if live.engine_error is not None:
                    raise ServiceError.from_status(live.engine_error)
                results = live.outputs
            else:
                result = await self.engine.GenerateUnary(rendered.generate_request, timeout=context.time_remaining())
                if result.HasField("error"):
                    raise ServiceError.from_status(result.error)
                results = [result]
            return await self.derender.DerenderChat(
                derender_pb2.DerenderChatRequest(context=rendered.derender_context, results=results),
                timeout=context.time_remaining(),
            )
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None

    async def StreamChatCompletion(self, request, context):
        try:
            rendered = await self.render.RenderChat(request, timeout=context.time_remaining())
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None
        live = LiveGeneration(self, rendered, context)
        sent_any = False
        try:
            async for answer in live.answers():
                yield answer.chat
                sent_any = True
            if live.engine_error is not None:
                yield _error_chunk(rendered, live.engine_error)
        except grpc.aio.AioRpcError as error:
            failure = ServiceError.from_rpc_error(error)
            if not sent_any:
                raise failure from None
            # HTTP/1.1 clients never see trailers: the outcome travels in-band.
            yield _error_chunk(rendered, failure.to_status())


class LiveGeneration:
    """The engine's stream piped through derender's stateful stream.

    The engine call is cancelled (which aborts the request and frees its cache) as soon as derender reports a
    matched stop string. `outputs` keeps the engine messages that were forwarded; an in-band engine error ends
    the stream and lands in `engine_error`.
    """

    def __init__(self, pipeline: ChatPipeline, rendered, context):
        self._rendered = rendered
        self._engine_call = pipeline.engine.Generate(rendered.generate_request, timeout=context.time_remaining())
        self._derender_call = pipeline.derender.DerenderStream(timeout=context.time_remaining())
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


def _error_chunk(rendered, status) -> derender_pb2.ChatCompletionChunk:
    ctx = rendered.derender_context
    return derender_pb2.ChatCompletionChunk(
        id=ctx.id, object="chat.completion.chunk", created=ctx.created, model=ctx.model, error=status
    )


def parser():
    p = server_parser("chat", 50054, "One-hop OpenAI-compatible chat over render, engine and derender")
    p.add_argument("--render-target", default="127.0.0.1:50051", help="render_svc address (or the gateway)")
    p.add_argument("--engine-target", default="127.0.0.1:50052", help="engine_svc address (or the gateway)")
    p.add_argument("--derender-target", default="127.0.0.1:50053", help="derender_svc address (or the gateway)")
    return p


def main() -> None:
    args = parser().parse_args()
    run(ChatPipeline(args), args)


if __name__ == "__main__":
    main()
