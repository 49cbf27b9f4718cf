"""vLLM 0.33's `POST /inference/v1/generate` (VllmServerService.Generate): token ids in, token ids out, as a face over
EngineService.Generate.

The body is vLLM's GenerateRequest (vllm_generate_request.py maps it; `bad_words` and `structured_outputs` without our
render's block are compiled by render for these token ids); the engine is called through the gateway,
balanced on the prefix-hash header as EngineStreamService's relay is; the answer is vLLM's (vllm_generate_output.py):
one GenerateTokensResponse, or with `"stream": true` one `data: {GenerateTokensStreamResponse}` event per choice that
advanced, the usage chunk when `stream_options.include_usage`, and `data: [DONE]`. A `model` that is not served is a
404 (MODEL_NOT_FOUND), as vLLM's `_check_model`. An error before the first event is the HTTP answer (the engine's
status, the field named in vLLM's path: `sampling_params.n`); after it an in-band `data: {"error": ...}` event, then
`data: [DONE]`, as vLLM's stream ends. A client that goes away cancels the engine call, which aborts the request.
"""

from __future__ import annotations

import grpc
from google.api import httpbody_pb2
from google.protobuf import json_format

from pipeline_svc.answer_pieces import pieces
from pipeline_svc.engine_stream import routing_metadata
from pipeline_svc.faces.vllm_generate_levels import level_context, leveled
from pipeline_svc.faces.vllm_generate_output import GenerateAnswer
from pipeline_svc.faces.vllm_generate_request import VllmGenerate, parse
from pipeline_svc.hops import Hops, broken_off
from pipeline_svc.openai_service import DONE, data_event
from pipeline_svc.shaped_route import json_body
from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError, clip, quote
from scaleout_common.json_body import load_object
from scaleout_common.openai_errors import vllm_error_object
from scaleout_common.reasons import Reason, fail

# Our request's field paths -> vLLM's, in errors (the engine and render name ours).
VLLM_PATHS = {"n": "sampling_params.n", "prompt_token_ids[0]": "token_ids"}
SAMPLING_PREFIXED = ("structured_outputs", "bad_words")


def _in_vllm_terms(error: ServiceError) -> ServiceError:
    def vllm(field: str) -> str:
        field = VLLM_PATHS.get(field, field)
        return "sampling_params." + field if field.startswith(SAMPLING_PREFIXED) else field

    error.violations = [(vllm(field), why) for field, why in error.violations]
    return error


class VllmGenerateFace:
    def __init__(self, hops: Hops):
        self.hops = hops
        self.served: list[str] = []  # render's served names, then its LoRA adapters' (asked again on a miss)
        self.adapters: set[str] = set()

    async def model_name(self, asked: str | None, context) -> str:
        if not self.served or (asked and asked not in self.served):
            models = await self.hops.render.ListModels(render_pb2.ListModelsRequest(), timeout=context.time_remaining())
            self.served = [card.id for card in models.data]
            self.adapters = {card.id for card in models.data if card.HasField("parent")}
        if asked and asked not in self.served:
            raise fail(Reason.MODEL_NOT_FOUND, f"The model {quote(asked)} does not exist.", "model")
        return asked or self.served[0]

    async def __call__(self, request: httpbody_pb2.HttpBody, context):
        generate = parse(load_object(request.data))
        if generate.stream and generate.typed.kv_transfer_params.fields.get("do_remote_decode"):
            field = "kv_transfer_params"
            raise fail(Reason.UNSUPPORTED_FIELD, f"{field} (a prefill step) needs stream false: its answer", field)
        try:
            answer = GenerateAnswer(generate, await self.model_name(generate.model, context))
            if generate.model in self.adapters:
                generate.typed.lora_name = generate.model  # vLLM's `model` naming an adapter runs it
            if generate.asks:
                await self._compile(generate, context)
        except grpc.aio.AioRpcError as error:
            raise _in_vllm_terms(ServiceError.from_rpc_error(error)) from None
        async for event in self._generate(generate, answer, context):
            yield event

    async def _compile(self, generate: VllmGenerate, context) -> None:
        """bad_words and structured_outputs compiled by render for these token ids (its tokenizer, its reasoning
        parser reading the prompt), as vLLM's server tokenizes the words and its engine-side parser decides."""
        asks, sampling = generate.asks, generate.typed.sampling_params
        request = render_pb2.RenderCompletionRequest(model=generate.typed.model, bad_words=asks.get("bad_words", []))
        request.prompt_token_ids.add(token_ids=generate.typed.token_ids)
        if "structured_outputs" in asks:
            try:
                json_format.ParseDict(asks["structured_outputs"], request.structured_outputs)
            except json_format.ParseError as error:
                field = "sampling_params.structured_outputs"
                raise fail(Reason.INVALID_REQUEST, f"{field}: {clip(str(error))}", field) from None
        rendered = await self.hops.render.RenderCompletion(request, timeout=context.time_remaining())
        compiled = rendered.prompts[0].generate_request
        sampling.bad_words.extend(compiled.sampling_params.bad_words)
        if compiled.sampling_params.HasField("structured_outputs"):
            sampling.structured_outputs.CopyFrom(compiled.sampling_params.structured_outputs)
            sampling.structured_outputs.reasoning_ended |= generate.reasoning_ended
        generate.typed.tokenizer_fingerprint = generate.typed.tokenizer_fingerprint or compiled.tokenizer_fingerprint

    async def _leveled(self, generate: VllmGenerate, whole: dict, messages: list, context) -> dict:
        """The tokens answer at vLLM's text or derender level (vllm_generate_levels.py)."""
        body = generate.body or {}
        rendered = ((body.get("scaleout") or {}).get("derender_context")) or None
        derender_context = level_context(generate.output_mode, body, rendered, generate.typed, whole.get("model") or "")
        return await leveled(self.hops, generate.output_mode, derender_context, messages, whole, context)

    async def _generate(self, generate: VllmGenerate, answer: GenerateAnswer, context):
        metadata = routing_metadata(generate.typed, context)
        call = self.hops.engine.Generate(generate.typed, timeout=context.time_remaining(), metadata=metadata)
        started, messages = False, []
        try:
            async for message in call:
                if message.HasField("error"):
                    raise ServiceError.from_status(message.error)
                messages.append(message)
                for chunk in answer.feed(message):
                    if generate.stream:
                        started = True
                        yield data_event(chunk)
                if message.finished:
                    break
            else:
                raise fail(Reason.UPSTREAM_LOST, "the engine stream ended without its terminal message")
            if not generate.stream:
                whole = answer.unary()
                if generate.output_mode != "tokens":
                    whole = await self._leveled(generate, whole, messages, context)
                for piece in pieces(json_body(whole)):  # its prompt logprobs may exceed one message
                    yield piece
                return
            if generate.include_usage:
                yield data_event(answer.usage_chunk())
        except (grpc.aio.AioRpcError, ServiceError) as error:
            if not started:
                raise _in_vllm_terms(ServiceError.of(error)) from None
            yield data_event(vllm_error_object(broken_off(error)))  # HTTP/1.1 clients never see trailers
        finally:
            call.cancel()  # a no-op once it ended; else the engine aborts the request
        yield DONE
