"""ChatService: the one-hop chat with the contract's typed messages (render -> generate -> derender)."""

from __future__ import annotations

import grpc

from pipeline_svc import telemetry as _telemetry  # noqa: F401  (registers the readers of the chat's messages)
from pipeline_svc.hops import Hops, LiveGeneration, broken_off, rpc_errors_typed
from scaleout.v1 import chat_pb2_grpc, derender_pb2
from scaleout_common.errors import ServiceError


class ChatPipeline(chat_pb2_grpc.ChatServiceServicer):
    def __init__(self, hops: Hops):
        self.hops = hops

    @rpc_errors_typed
    async def CreateChatCompletion(self, request, context):
        hops = self.hops
        rendered = await hops.render.RenderChat(request, timeout=context.time_remaining())
        results = await hops.generate(rendered, context)
        return await hops.derender.DerenderChat(
            derender_pb2.DerenderChatRequest(context=rendered.derender_context, results=results),
            timeout=context.time_remaining(),
        )

    async def StreamChatCompletion(self, request, context):
        try:
            rendered = await self.hops.render.RenderChat(request, timeout=context.time_remaining())
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None
        sent_any = False
        try:
            async for answer in LiveGeneration(self.hops, rendered, context).answers():
                sent_any = True
                yield answer.chat
        except (grpc.aio.AioRpcError, ServiceError) as error:
            if not sent_any:
                raise ServiceError.of(error) from None
            # HTTP/1.1 clients never see trailers: the outcome travels in-band.
            yield error_chunk(rendered, broken_off(error).to_status())


def error_chunk(rendered, status) -> derender_pb2.ChatCompletionChunk:
    ctx = rendered.derender_context
    return derender_pb2.ChatCompletionChunk(
        id=ctx.id, object="chat.completion.chunk", created=ctx.created, model=ctx.model, error=status
    )
