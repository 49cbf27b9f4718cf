"""OpenAIService: `/v1/chat/completions` and `/v1/completions` as OpenAI's clients speak them.

Unary: one HttpBody of `application/json`. `"stream": true`: one HttpBody per server-sent event, written as
soon as derender has it (the gateway passes each one straight through), ending with `data: [DONE]`.
With `stream_options.include_usage` every chunk has `"usage": null` and a last chunk with empty `choices`
carries the usage; `continuous_usage_stats` (vLLM) puts the running usage on every chunk. With vLLM's
`--enable-force-include-usage` every stream is answered as if it asked for both; with its
`--return-tokens-as-token-ids` a request that does not say otherwise has `return_tokens_as_token_ids`; with its
`--enable-per-request-metrics` an answer has vLLM's `metrics` (request_metrics.py): unary at the top level, a
stream on its usage chunk (so only with `include_usage`, as vLLM); without it, as vLLM, only where the engine
reported speculation counts (its --per-request-spec-decode-metrics), the timings null.

An error before the first byte is a typed status (the gateway prints OpenAI's error object with the HTTP
status); after it, an in-band `data: {"error": ...}` event (`hops.broken_off`: the upstream's typed status, or
UPSTREAM_LOST) and `data: [DONE]`, because HTTP/1.1 clients never see trailers. Several completion prompts
stream interleaved, each choice under its flat index, one choice per chunk (as OpenAI and vLLM stream `n`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import uuid

import grpc
from google.api import httpbody_pb2
from opentelemetry import trace

from pipeline_svc import (
    decisions,
    decisions_request,
    embeddings_request,
    label_reads,
    openai_request,
    openai_response,
    request_metrics,
)
from pipeline_svc import telemetry as _telemetry  # noqa: F401  (registers the readers of the typed messages)
from pipeline_svc.answer_pieces import pieces
from pipeline_svc.client_fields import OPENAI_CHAT, OPENAI_COMPLETION, named
from pipeline_svc.embed_call import embed
from pipeline_svc.embeddings_bytes import BYTES_ENCODINGS, bytes_answer
from pipeline_svc.embeddings_response import embeddings
from pipeline_svc.faces import sglang_decisions
from pipeline_svc.hops import Hops, LiveGeneration, broken_off
from pipeline_svc.shaped_route import SSE, json_body
from scaleout.v1 import common_pb2, derender_pb2, openai_pb2_grpc
from scaleout_common.errors import ServiceError
from scaleout_common.json_body import load_object
from scaleout_common.openai_errors import error_object
from scaleout_common.prompt_logprob_rules import asked, oversized
from scaleout_common.telemetry.call_summary import observe_request, observe_response

DONE = httpbody_pb2.HttpBody(content_type=SSE, data=b"data: [DONE]\n\n")


def data_event(payload: dict) -> httpbody_pb2.HttpBody:
    data = b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
    return httpbody_pb2.HttpBody(content_type=SSE, data=data)


class OpenAIFrontDoor(openai_pb2_grpc.OpenAIServiceServicer):
    def __init__(
        self,
        hops: Hops,
        force_usage: bool = False,
        token_ids_as_tokens: bool = False,
        per_request_metrics: bool = False,
    ):
        self.hops = hops
        self.labels = label_reads.LabelTokens(hops)  # /v1/decisions' option letters, asked of render once
        self.per_request_metrics = per_request_metrics  # vLLM's --enable-per-request-metrics
        self.force_usage = force_usage  # vLLM's --enable-force-include-usage: every stream as include + continuous
        # vLLM's --return-tokens-as-token-ids: the field's default, which a request's own value overrides
        self.defaults = {"return_tokens_as_token_ids": True} if token_ids_as_tokens else {}

    def _forced(self, parsed: openai_request.OpenAIRequest) -> openai_request.OpenAIRequest:
        if self.force_usage and parsed.stream:
            parsed.include_usage = parsed.continuous_usage = True
            options = parsed.typed.stream_options  # derender counts the usage it is told to print
            options.include_usage = options.continuous_usage_stats = True
        return parsed

    async def ChatCompletions(self, request, context):
        async for event in named(self._chat(request, context), request.data, OPENAI_CHAT):
            yield event

    async def Completions(self, request, context):
        async for event in named(self._completions(request, context), request.data, OPENAI_COMPLETION):
            yield event

    async def Embeddings(self, request, context):
        """Render tokenizes, a pooling engine embeds (no derender: the answer is numbers)."""
        parsed = embeddings_request.embeddings_request(request.data)
        span = trace.get_current_span()
        for name, value in parsed.identity.items():
            span.set_attribute(f"openai.request.{name}", value)
        rename = functools.partial(embeddings_request.in_client_terms, body=request.data)
        answer, model = await embed(self.hops, parsed.typed, context, rename, chat=parsed.chat)
        if parsed.encoding in BYTES_ENCODINGS:
            return await bytes_answer(answer, model, parsed, "embd", context)
        return json_body(embeddings(answer, model, parsed.encoding, parsed.byte_order, parsed.embed_dtype))

    async def Decisions(self, request, context):
        """One engine read per question (pipeline_svc/decisions.py; SGLang's body of the same path:
        faces/sglang_decisions.py); no derender: the answer is probabilities."""
        if sglang_decisions.is_sglang_body(load_object(request.data)):
            return json_body(await sglang_decisions.decide(self.hops, self.labels, request.data, context))
        parsed = decisions_request.decision_request(request.data)
        span = trace.get_current_span()
        for name, value in parsed.identity.items():
            span.set_attribute(f"openai.request.{name}", value)
        request_id = f"decision-{uuid.uuid4().hex}"
        return json_body(await decisions.decide(self.hops, self.labels, parsed, request_id, context))

    async def _chat(self, request, context):
        parsed = self._forced(openai_request.chat_request(request.data, self.defaults))
        ids = parsed.typed.return_token_ids
        if not parsed.stream:
            for piece in pieces(json_body(await self.chat_completion(parsed, context))):
                yield piece
            return
        _observe_request(parsed)
        try:
            rendered = await self.hops.render.RenderChat(parsed.typed, timeout=context.time_remaining())
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None
        live = LiveGeneration(self.hops, rendered, context)
        shape = lambda answer, usage: openai_response.chat_chunk(answer.chat, usage, ids)  # noqa: E731
        async for event in _sse(parsed, [live], shape, self.per_request_metrics):
            yield event

    async def chat_completion(self, parsed: openai_request.OpenAIRequest, context) -> dict:
        """A unary chat completion's JSON (also one conversation of vLLM's batch route, faces/vllm_batch_chat.py)."""
        _observe_request(parsed)
        try:
            rendered = await self.hops.render.RenderChat(parsed.typed, timeout=context.time_remaining())
            results = await self.hops.outputs(rendered, parsed.beam, context)
            completion = await self.hops.derender.DerenderChat(
                derender_pb2.DerenderChatRequest(context=rendered.derender_context, results=results),
                timeout=context.time_remaining(),
            )
        except grpc.aio.AioRpcError as error:
            raise oversized(ServiceError.from_rpc_error(error), asked(parsed.typed), "prompt_logprobs") from None
        observe_response(completion)
        extras = openai_response.kv_transfer_params(results)
        tokens = completion.usage.completion_tokens
        extras |= request_metrics.answer_metrics([results], parsed.typed.n, tokens, self.per_request_metrics)
        return openai_response.chat_completion(completion, parsed.typed.return_token_ids) | extras

    async def _completions(self, request, context):
        parsed = self._forced(openai_request.completion_request(request.data, self.defaults))
        ids = parsed.typed.return_token_ids
        _observe_request(parsed)
        try:
            rendered = await self.hops.render.RenderCompletion(parsed.typed, timeout=context.time_remaining())
            if not parsed.stream:
                outputs = (self.hops.outputs(p, parsed.beam, context) for p in rendered.prompts)
                results = await asyncio.gather(*outputs)
                prompts = [
                    derender_pb2.CompletionResult(context=p.derender_context, results=r)
                    for p, r in zip(rendered.prompts, results)
                ]
                completion = await self.hops.derender.DerenderCompletion(
                    derender_pb2.DerenderCompletionRequest(prompts=prompts), timeout=context.time_remaining()
                )
                observe_response(completion)
                extras = openai_response.kv_transfer_params(r for prompt in results for r in prompt)
                tokens = completion.usage.completion_tokens
                extras |= request_metrics.answer_metrics(results, parsed.typed.n, tokens, self.per_request_metrics)
                answer = openai_response.completion(completion, streamed=False, token_ids=ids) | extras
                for piece in pieces(json_body(answer)):
                    yield piece
                return
        except grpc.aio.AioRpcError as error:
            raise oversized(ServiceError.from_rpc_error(error), asked(parsed.typed), "prompt_logprobs") from None
        lives = [LiveGeneration(self.hops, p, context) for p in rendered.prompts]
        shape = lambda answer, usage: openai_response.completion(  # noqa: E731
            answer.completion, streamed=True, with_usage=usage, token_ids=ids
        )
        async for event in _sse(parsed, lives, shape, self.per_request_metrics):
            yield event


async def _sse(parsed: openai_request.OpenAIRequest, lives: list[LiveGeneration], shape, metrics: bool = False):
    """Every live generation's chunks as events, then the usage chunk (when asked for; with `metrics`, vLLM's
    per-request metrics on it) and [DONE]; a failure before the first event is raised (an HTTP error), after it
    an error event (`hops.broken_off`) and [DONE]."""
    usage_per_prompt: dict[int, common_pb2.Usage] = {}
    head: dict = {}
    started = False
    try:
        async for index, answer in merged(lives):
            chunk = answer.chat if answer.HasField("chat") else answer.completion
            observe_response(chunk)
            if chunk.HasField("usage"):
                usage_per_prompt[index] = chunk.usage
            payload = shape(answer, parsed.include_usage)
            head = {k: payload[k] for k in ("id", "object", "created", "model")}
            if payload["choices"] or parsed.continuous_usage:
                if parsed.continuous_usage:
                    payload["usage"] = openai_response.usage(_total(usage_per_prompt))
                started = True
                for event in _per_choice(payload):
                    yield data_event(event)
        if parsed.include_usage and head:
            started = True
            total = _total(usage_per_prompt)
            chunk = openai_response.usage_chunk(head, total)
            measured = request_metrics.metrics(
                [live.outputs for live in lives], parsed.typed.n, total.completion_tokens, timed=metrics
            )
            chunk |= request_metrics.without_nulls(measured)
            yield data_event(chunk)
    except (grpc.aio.AioRpcError, ServiceError) as error:
        if not started:
            raise ServiceError.of(error) from None
        # HTTP/1.1 clients never see trailers: the outcome travels in-band.
        yield data_event(error_object(broken_off(error)))
    yield DONE


def _per_choice(payload: dict) -> list[dict]:
    """One chunk per choice, as OpenAI and vLLM stream `n` > 1: clients read each chunk's `choices[0]`."""
    choices = payload["choices"]
    return [payload | {"choices": [choice]} for choice in choices] if len(choices) > 1 else [payload]


async def merged(lives: list[LiveGeneration]):
    """(prompt index, answer) from every generation as they come."""
    if len(lives) == 1:
        async for answer in lives[0].answers():
            yield 0, answer
        return
    queue: asyncio.Queue = asyncio.Queue()

    async def pump(index: int, live: LiveGeneration) -> None:
        try:
            async for answer in live.answers():
                await queue.put((index, answer, None))
            await queue.put((index, None, None))
        except Exception as error:  # handed to the consumer, which raises it
            await queue.put((index, None, error))

    tasks = [asyncio.create_task(pump(i, live)) for i, live in enumerate(lives)]
    try:
        remaining = len(tasks)
        while remaining:
            index, answer, error = await queue.get()
            if error is not None:
                raise error
            if answer is None:
                remaining -= 1
            else:
                yield index, answer
    finally:
        for task in tasks:
            task.cancel()


def _total(per_prompt: dict[int, common_pb2.Usage]) -> common_pb2.Usage:
    total = common_pb2.Usage()
    for usage in per_prompt.values():
        total.prompt_tokens += usage.prompt_tokens
        total.completion_tokens += usage.completion_tokens
        total.total_tokens += usage.total_tokens
        total.cached_tokens += usage.cached_tokens
        if usage.HasField("completion_tokens_details"):
            reasoned = usage.completion_tokens_details.reasoning_tokens
            total.completion_tokens_details.reasoning_tokens += reasoned
    return total


def _observe_request(parsed: openai_request.OpenAIRequest) -> None:
    """The typed request to telemetry (gen_ai.request.*), and `user` / `safety_identifier` on the span."""
    observe_request(parsed.typed)
    span = trace.get_current_span()
    for name, value in parsed.identity.items():
        span.set_attribute(f"openai.request.{name}", value)
