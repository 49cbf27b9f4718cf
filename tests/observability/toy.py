"""Two small in-process services on the real contract, to test the shared telemetry plumbing alone.

ToyEngine streams fixed token ids like an engine; ToyFront calls it through `open_channel` (client
interceptors, traceparent) like the one-hop chat service does. Their messages are the engine's and the chat
pipeline's, so the gen_ai readers those packages register apply. Real gRPC servers with the production
bootstrap; the services' own behaviour is what the other test folders check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from devstack.stack import free_port
from engine_svc.serving import telemetry as _engine_readers  # noqa: F401  (ToyEngine's messages are the engine's)
from pipeline_svc import telemetry as _chat_readers  # noqa: F401  (ToyFront's are the chat pipeline's)
from scaleout.v1 import chat_pb2_grpc, common_pb2, derender_pb2, engine_pb2, engine_pb2_grpc
from scaleout_common.channels import open_channel
from scaleout_common.config import server_parser
from scaleout_common.reasons import Reason, fail
from scaleout_common.telemetry.call_summary import report_engine_timing
from tests.serving import NoLifecycle
from tests.serving import serving as shared_serving

OUTPUT = [[11], [12], [13, 14]]  # three messages, four tokens
log = logging.getLogger("toy")


class ToyEngine(engine_pb2_grpc.EngineServiceServicer, NoLifecycle):
    service_names = ("scaleout.v1.EngineService",)

    def __init__(self):
        self.waiting, self.running = 0, 0

    def register(self, server):
        engine_pb2_grpc.add_EngineServiceServicer_to_server(self, server)

    def watch_metrics(self, llm):
        llm.watch(queue_depth=lambda: self.waiting, running=lambda: self.running, kv_cache_usage=lambda: 0.25)

    async def Generate(self, request, context):
        if not request.token_ids:
            raise fail(Reason.EMPTY_PROMPT, "token_ids is empty", "token_ids")
        log.info("generating")
        report_engine_timing(queue_s=0.01, prefill_s=0.02)
        for i, tokens in enumerate(OUTPUT):
            last = i == len(OUTPUT) - 1
            message = engine_pb2.GenerateResponse(request_id=request.request_id or "gen-1")
            choice = message.choices.add(index=0, token_ids=tokens)
            if i == 0:
                message.prompt.num_tokens = len(request.token_ids)
            if last:
                choice.finish_reason = common_pb2.FINISH_REASON_LENGTH
                message.usage.prompt_tokens = len(request.token_ids)
                message.usage.completion_tokens = sum(map(len, OUTPUT))
                message.finished = True
            await asyncio.sleep(0.01)
            yield message

    async def GenerateUnary(self, request, context):
        whole = engine_pb2.GenerateResponse()
        async for message in self.Generate(request, context):
            whole.MergeFrom(message)
        report_engine_timing(first_token_at=time.perf_counter())
        return whole


class ToyFront(chat_pb2_grpc.ChatServiceServicer, NoLifecycle):
    """CreateChatCompletion = one Generate stream on the engine, answered as a ChatCompletion."""

    service_names = ("scaleout.v1.ChatService",)

    def __init__(self, engine_target: str):
        self.engine_target = engine_target

    def register(self, server):
        chat_pb2_grpc.add_ChatServiceServicer_to_server(self, server)

    async def load(self):
        self.channel = open_channel(self.engine_target)
        self.engine = engine_pb2_grpc.EngineServiceStub(self.channel)

    async def close(self):
        await self.channel.close()

    async def CreateChatCompletion(self, request, context):
        prompt = [1, 2, 3] if request.messages else []
        generate = engine_pb2.GenerateRequest(request_id="gen-7", token_ids=prompt, model=request.model)
        tokens = []
        async for message in self.engine.Generate(generate, timeout=context.time_remaining()):
            for choice in message.choices:
                tokens += choice.token_ids
        completion = derender_pb2.ChatCompletion(id="chatcmpl-7", model=request.model or "toy")
        completion.choices.add(index=0, finish_reason="length").message.content = " ".join(map(str, tokens))
        completion.usage.prompt_tokens, completion.usage.completion_tokens = len(prompt), len(tokens)
        return completion


@dataclass
class Served:
    target: str
    metrics_url: str | None


@contextlib.asynccontextmanager
async def serving(service, metrics: bool = False):
    """Serve `service` with the production bootstrap until SERVING; /metrics on a free port when asked for."""
    metrics_port = free_port() if metrics else -1
    async with shared_serving(service, server_parser("toy", 0, "toy"), "--metrics-port", str(metrics_port)) as target:
        yield Served(target, f"http://127.0.0.1:{metrics_port}/metrics" if metrics else None)
