"""The bench's two ways in: the engine's gRPC API (token ids), and the gateway's one-hop chat (text, through
Envoy, render, engine and derender). Each runs one conversation turn by turn and times every turn."""

from __future__ import annotations

import asyncio
import itertools
import time

import grpc

from bench.serving.datasets import Conversation
from bench.serving.metrics import RequestResult
from scaleout.v1 import chat_pb2_grpc, common_pb2, engine_pb2, engine_pb2_grpc, render_pb2

OPTIONS = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]


class _Connections:
    """`connections` channels to `target`, each its own connection (the engine's API servers are dealt
    connections, not calls); every turn takes the next."""

    stub_class: type

    def __init__(self, target: str, connections: int = 1):
        self.target, self.connections = target, connections
        options = OPTIONS + ([("grpc.use_local_subchannel_pool", 1)] if connections > 1 else [])
        self.channels = [grpc.aio.insecure_channel(target, options=options) for _ in range(connections)]
        self._stubs = itertools.cycle([self.stub_class(channel) for channel in self.channels])

    @property
    def stub(self):
        return next(self._stubs)

    async def ready(self) -> None:
        await asyncio.gather(*[channel.channel_ready() for channel in self.channels])

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()


class EngineClient(_Connections):
    """Token ids straight to EngineService.Generate; the history grows by the sampled ids."""

    stub_class = engine_pb2_grpc.EngineServiceStub

    async def conversation(self, conversation: Conversation, salt: str = "") -> list[RequestResult]:
        history: list[int] = list(conversation.system)  # type: ignore[arg-type]
        results = []
        for turn in conversation.turns:
            history += turn.user  # type: ignore[arg-type]
            request = engine_pb2.GenerateRequest(
                token_ids=history,
                sampling_params=common_pb2.SamplingParams(temperature=0.0, max_tokens=turn.output_len, ignore_eos=True),
                cache_salt=salt,
            )
            result = RequestResult(prompt_tokens=len(history), start=time.perf_counter())
            output: list[int] = []
            try:
                async for message in self.stub.Generate(request):
                    now = time.perf_counter()
                    if message.HasField("error"):
                        result.error = message.error.message
                        break
                    if message.HasField("prompt"):
                        result.cached_tokens = message.prompt.cached_tokens
                    tokens = [t for c in message.choices for t in c.token_ids]
                    if tokens:
                        result.first_token = result.first_token or now
                        result.chunk_times.append(now)
                        output += tokens
            except grpc.aio.AioRpcError as error:
                result.error = f"{error.code().name}: {error.details()}"
            result.end = time.perf_counter()
            result.output_tokens = len(output)
            results.append(result)
            if result.error:
                break
            history += output
        return results


class GatewayChatClient(_Connections):
    """OpenAI-shaped chat through the gateway's one hop (ChatService.StreamChatCompletion over gRPC): render,
    then the engine (routed on render's prefix hash), then derender. The history grows by the answer's text."""

    stub_class = chat_pb2_grpc.ChatServiceStub

    async def conversation(self, conversation: Conversation, salt: str = "") -> list[RequestResult]:
        messages = []
        if conversation.system:
            messages.append(common_pb2.ChatMessage(role="system"))
            messages[-1].content.string_value = str(conversation.system)
        results = []
        for turn in conversation.turns:
            messages.append(common_pb2.ChatMessage(role="user"))
            messages[-1].content.string_value = str(turn.user)
            request = render_pb2.RenderChatRequest(
                messages=messages,
                max_tokens=turn.output_len,
                temperature=0.0,
                ignore_eos=True,
                cache_salt=salt,
                stream_options=render_pb2.StreamOptions(include_usage=True),
            )
            result = RequestResult(start=time.perf_counter())
            text: list[str] = []
            try:
                async for chunk in self.stub.StreamChatCompletion(request):
                    now = time.perf_counter()
                    if chunk.HasField("error"):
                        result.error = chunk.error.message
                        break
                    pieces = [c.delta.content for c in chunk.choices if c.delta.content]
                    if pieces:
                        result.first_token = result.first_token or now
                        result.chunk_times.append(now)
                        text += pieces
                    if chunk.HasField("usage"):
                        result.prompt_tokens = chunk.usage.prompt_tokens
                        result.output_tokens = chunk.usage.completion_tokens
                        result.cached_tokens = chunk.usage.cached_tokens
            except grpc.aio.AioRpcError as error:
                result.error = f"{error.code().name}: {error.details()}"
            result.end = time.perf_counter()
            results.append(result)
            if result.error:
                break
            messages.append(common_pb2.ChatMessage(role="assistant"))
            messages[-1].content.string_value = "".join(text) or "ok"
        return results
