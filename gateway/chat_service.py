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
            result = await self.engine.GenerateUnary(rendered.generate_request, timeout=context.time_remaining())
            if result.HasField("error"):
                raise ServiceError.from_status(result.error)
            return await self.derender.DerenderChat(
                derender_pb2.DerenderChatRequest(context=rendered.derender_context, results=[result]),
                timeout=context.time_remaining(),
            )
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None

    async def StreamChatCompletion(self, request, context):
        try:
            rendered = await self.render.RenderChat(request, timeout=context.time_remaining())
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None
        engine_call = self.engine.Generate(rendered.generate_request, timeout=context.time_remaining())
        derender_call = self.derender.DerenderStream(timeout=context.time_remaining())
        stopped_early = False
        engine_error = None

        async def pump() -> None:
            nonlocal engine_error
            try:
                await derender_call.write(derender_pb2.DerenderStreamRequest(context=rendered.derender_context))
                async for output in engine_call:
                    if output.HasField("error"):
                        engine_error = output.error
                        break
                    await derender_call.write(derender_pb2.DerenderStreamRequest(engine_output=output))
            except asyncio.CancelledError:
                if not stopped_early:
                    raise
            finally:
                await derender_call.done_writing()

        pump_task = asyncio.create_task(pump())
        sent_any = False
        try:
            async for answer in derender_call:
                yield answer.chat
                sent_any = True
                if answer.stop_generation and not stopped_early:
                    stopped_early = True
                    engine_call.cancel()
            await pump_task
            if engine_error is not None:
                yield _error_chunk(rendered, engine_error)
        except grpc.aio.AioRpcError as error:
            failure = ServiceError.from_rpc_error(error)
            if not sent_any:
                raise failure from None
            # HTTP/1.1 clients never see trailers: the outcome travels in-band.
            yield _error_chunk(rendered, failure.to_status())
        finally:
            for task_or_call in (pump_task, engine_call, derender_call):
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
