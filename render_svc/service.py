"""The gRPC face of render_svc: a thin servicer over the pure renderer modules.

Small requests render right on the event loop (a thread hop costs more than a short render); large ones and
batches run in a thread pool, where the tokenizer's Rust batch encode runs without the GIL. Requests that bring
their own chat_template run in a pool of their own, one thread per sandbox worker: each may hold its thread for
up to --template-timeout-s, so they never take the large renders' threads, and more than
--max-pending-templates of them at once are refused at once (RENDER_QUEUE_FULL) rather than queued.
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor

from render_svc import flags
from render_svc import telemetry as _telemetry  # noqa: F401  (registers the readers of render's messages)
from render_svc.api_rpcs import count_message_tokens, count_response_tokens, render_messages, render_responses
from render_svc.bridge import bridge_chat
from render_svc.completion import render_completion
from render_svc.embedding import render_embedding
from render_svc.http_face import HttpFace, HttpFaceServer
from render_svc.lora_names import load_adapter, unload_adapter
from render_svc.model import load_model
from render_svc.renderer import Renderer
from render_svc.tokenize_rpcs import detokenize, get_model, list_models, tokenize
from render_svc.vllm_render import render_chat_vllm, render_completion_vllm
from render_svc.vllm_render.apis import render_messages_vllm, render_responses_vllm
from render_svc.vllm_render.tokenize import tokenize_vllm, tokenizer_info
from scaleout.v1 import render_pb2, render_pb2_grpc
from scaleout_common.identity import caller, require_trusted
from scaleout_common.reasons import Reason, fail

log = logging.getLogger(__name__)


class RenderService:
    service_names = (render_pb2.DESCRIPTOR.services_by_name["RenderService"].full_name,)

    def __init__(self, args):
        self.args = args
        self.renderer: Renderer | None = None
        self._pool = BoundedPool(
            args.render_threads or os.cpu_count() or 2, args.max_pending_renders, "large renders", "render"
        )
        self._templates = BoundedPool(
            args.template_workers, args.max_pending_templates, "request-template renders", "template"
        )
        self.http: HttpFaceServer | None = None

    def readiness(self, serving) -> None:
        """The HTTP face (--http-port) binds beside the gRPC port; it says NOT_READY until load() is done."""
        if self.args.http_port < 0:
            return
        if getattr(self.args, "tls_dir", None):
            raise SystemExit("--http-port serves plaintext HTTP: not with --tls-dir")
        face = HttpFace(self, self.args.max_message_mb * 1024 * 1024, serving)
        self.http = HttpFaceServer(face, self.args.host, self.args.http_port, self.args.drain_grace_s)
        self.http.start()
        print(f"LISTENING_HTTP {self.service_names[0]} {self.args.host}:{self.http.port}", flush=True)

    def register(self, server) -> None:
        render_pb2_grpc.add_RenderServiceServicer_to_server(RenderServicer(self), server)

    async def load(self) -> None:
        args = self.args
        model = await asyncio.to_thread(
            load_model,
            args.model,
            flags.served_names(args),
            args.chat_template,
            args.max_model_len,
            args.trust_remote_code,
        )
        self.renderer = Renderer(model, flags.limits(args), flags.options(args))
        if args.trust_request_chat_template:
            await asyncio.to_thread(self.renderer.templates.sandbox.warm)
        log.info("render ready: %s (max_model_len %d, %s)", model.name, model.max_model_len, model.fingerprint)

    @property
    def loaded_renderer(self) -> Renderer:
        """The renderer `load()` built (calls are refused as NOT_READY until it has returned)."""
        assert self.renderer is not None, "RenderService called before load()"
        return self.renderer

    async def drain(self) -> None:
        if self.http is not None:
            self.http.drain()

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()
        self._pool.close()
        self._templates.close()
        if self.renderer is not None:
            self.renderer.templates.close()

    async def call(self, function, request, offload: bool):
        if not offload:
            return function(self.renderer, request)
        return await self._pool.run(function, self.renderer, request)

    def call_json(self, function, data: bytes, templated: bool):
        """A JSON face's render (the client's bytes in, the answer's out), placed as `call_chat` places it: the
        answer itself when it rendered on the event loop, else an awaitable of it (no task for a short render)."""
        if templated:
            return self._templates.run(function, self.renderer, data)
        if len(data) < self.args.inline_bytes:
            return function(self.renderer, data)
        return self._pool.run(function, self.renderer, data)

    async def call_chat(self, function, request, templated: bool):
        """A chat render; one with a request chat_template (`templated`) always runs in the templates' own pool:
        however slow it is, the event loop never waits on it."""
        if templated:
            return await self._templates.run(function, self.renderer, request)
        return await self.call(function, request, self.is_large(request))

    def is_large(self, request) -> bool:
        return request.ByteSize() >= self.args.inline_bytes


class BoundedPool:
    """Threads for blocking renders, and a bound on the calls waiting or running in them: past it a call is
    refused at once (RENDER_QUEUE_FULL, which the gateway retries on another replica) instead of queued."""

    def __init__(self, threads: int, limit: int, what: str, name: str):
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix=name)
        self.limit, self.what = limit, what
        self.pending = 0

    async def run(self, function, *args):
        if self.pending >= self.limit:
            raise fail(Reason.RENDER_QUEUE_FULL, f"{self.pending} {self.what} are in progress; retry later")
        self.pending += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)
        finally:
            self.pending -= 1

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


class RenderServicer(render_pb2_grpc.RenderServiceServicer):
    def __init__(self, service: RenderService):
        self._service = service

    async def RenderChat(self, request, context):
        return await self._service.call_chat(Renderer.render_chat, request, request.HasField("chat_template"))

    async def RenderChatBatch(self, request, context):
        return await self._service.call(Renderer.render_chat_batch, request, offload=True)

    async def BridgeChat(self, request, context):
        return await self._service.call_chat(bridge_chat, request, request.request.HasField("chat_template"))

    async def RenderChatVllm(self, request, context):
        return await self._service.call_chat(render_chat_vllm, request, b'"chat_template"' in request.data)

    async def RenderCompletionVllm(self, request, context):
        return await self._service.call(render_completion_vllm, request, self._service.is_large(request))

    async def RenderMessages(self, request, context):
        return await self._service.call(render_messages, request, self._service.is_large(request))

    async def CountMessageTokens(self, request, context):
        return await self._service.call(count_message_tokens, request, self._service.is_large(request))

    async def RenderMessagesVllm(self, request, context):
        return await self._service.call(render_messages_vllm, request, self._service.is_large(request))

    async def RenderResponsesVllm(self, request, context):
        return await self._service.call(render_responses_vllm, request, self._service.is_large(request))

    async def RenderResponses(self, request, context):
        return await self._service.call(render_responses, request, self._service.is_large(request))

    async def CountResponseTokens(self, request, context):
        return await self._service.call(count_response_tokens, request, self._service.is_large(request))

    async def RenderCompletion(self, request, context):
        return await self._service.call(render_completion, request, self._service.is_large(request))

    async def RenderEmbedding(self, request, context):
        return await self._service.call(render_embedding, request, self._service.is_large(request))

    async def Tokenize(self, request, context):
        return await self._service.call(tokenize, request, self._service.is_large(request))

    async def TokenizeVllm(self, request, context):
        return await self._service.call(tokenize_vllm, request, self._service.is_large(request))

    async def TokenizerInfo(self, request, context):
        return tokenizer_info(self._service.loaded_renderer, self._service.args.enable_tokenizer_info_endpoint)

    async def Detokenize(self, request, context):
        return await self._service.call(detokenize, request, self._service.is_large(request))

    async def ListModels(self, request, context):
        return list_models(self._service.loaded_renderer, request)

    async def GetModel(self, request, context):
        return get_model(self._service.loaded_renderer, request)

    async def LoadLoraAdapter(self, request, context):
        require_trusted(caller(context), "LoadLoraAdapter")
        return load_adapter(self._service.loaded_renderer, self._service.args.enable_lora, request)

    async def UnloadLoraAdapter(self, request, context):
        require_trusted(caller(context), "UnloadLoraAdapter")
        return unload_adapter(self._service.loaded_renderer, request)
