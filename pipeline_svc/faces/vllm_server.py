"""vLLM's server routes that vllm-router and vLLM's clients call, as a face over the contract (vllm_server.proto).

`/health`, `/ping` and `/version` are the gateway's own answers (gateway/envoy.yaml.j2); here are those that need
the engines: vllm-router's `/get_load` (its power_of_two policy reads `load`), vLLM's `/load` (`server_load`),
`/reset_prefix_cache` and `/kv_event_sources` (vLLM 0.33's serve/instrumentator: its KVEventsConfig per
data-parallel rank), `/inference/v1/generate` and the derender routes (vllm_generate.py, vllm_derender.py), `/server_info`
(vllm_server_info.py: vLLM's config and SGLang's fields in one object), and those served by the one-hop routes:
SageMaker's `/invocations` (the body's shape picks the route among the stack's, as vLLM's serve/sagemaker does) and
`/v1/chat/completions/batch` (vllm_batch_chat.py); its pooling routes over an embedding model, `/score`, `/rerank`
(vllm_scoring.py), `/pooling` (vllm_pooling.py) and Cohere's `/v2/embed` (cohere_embed.py), through the embeddings' hops (embed_call.py); its RL routes (`/pause`, `/sleep`, `/update_weights`, ...) are
vllm_rl.py's.
Held against vllm-router 0.1.17 (its binary, run against a recording server: `GET /get_load`, `load` read as an
integer, -1 when missing) and vLLM 0.33's serve/dev/cache router (`{"success": bool}`, its two query flags).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from pipeline_svc.embed_call import embed
from pipeline_svc.embeddings_bytes import BYTES_ENCODINGS, bytes_answer
from pipeline_svc.embeddings_request import in_client_terms
from pipeline_svc.faces import sglang_score
from pipeline_svc.faces.cohere_embed import check_lengths, cohere_body, cohere_embed_request
from pipeline_svc.faces.cohere_embed import in_client_terms as cohere_in_client_terms
from pipeline_svc.faces.profile_routes import ProfileRoutes
from pipeline_svc.faces.sglang_server import served_model
from pipeline_svc.faces.vllm_batch_chat import batch_chat
from pipeline_svc.faces.vllm_derender import VllmDerender
from pipeline_svc.faces.vllm_derender_stream import VllmDerenderStream
from pipeline_svc.faces.vllm_generate import VllmGenerateFace
from pipeline_svc.faces.vllm_generative_scoring import generative_scoring
from pipeline_svc.faces.vllm_lora import VllmLora
from pipeline_svc.faces.vllm_pooling import pooling_body, pooling_request
from pipeline_svc.faces.vllm_rl import VllmRl
from pipeline_svc.faces.vllm_scoring import RERANK_PAIR, SCORE_PAIRS, parts, scoring_request
from pipeline_svc.faces.vllm_scoring import in_client_terms as scoring_in_client_terms
from pipeline_svc.faces.vllm_scoring_answer import rerank_body, score_body
from pipeline_svc.faces.vllm_server_info import server_info_body
from pipeline_svc.faces.vllm_systemone import structured_decision
from pipeline_svc.fleet_service import FleetOperations
from pipeline_svc.hops import Hops, rpc_errors_typed
from pipeline_svc.openai_service import OpenAIFrontDoor
from pipeline_svc.shaped_route import json_body
from scaleout.v1 import engine_pb2, fleet_pb2, kv_events_pb2, vllm_server_pb2_grpc
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

# vllm-router's `/get_load` <- the engine replicas that answered GetLoad: the sequences each runs and queues.
GET_LOAD: dict[str, Callable[[list[fleet_pb2.EngineLoad]], object]] = {
    "load": lambda engines: sum(e.load.running + e.load.waiting for e in engines),
}

# vLLM's `/load` <- the same replicas: vLLM counts the requests its API server holds, here the engines' sequences.
SERVER_LOAD: dict[str, Callable[[list[fleet_pb2.EngineLoad]], object]] = {
    "server_load": GET_LOAD["load"],
}

# vLLM's `/invocations` <- the keys whose presence picks the route, in vLLM's order of its invocation types, by the
# engine's runner (GetModelInfo.runner): a generate stack's chat (ChatCompletionRequest needs `messages`) and
# completions (`prompt`); a pooling stack's embeddings (`input`, or the chat form's `messages`, which the route
# refuses), rerank (`query` and `documents`) and score (any of its pairs); the names its refusal lists.
INVOCATION_KEYS = {
    "generate": (
        (("messages",), "ChatCompletionRequest", "ChatCompletions"),
        (("prompt",), "CompletionRequest", "Completions"),
    ),
    "pooling": (
        (("input",), "EmbeddingRequest", "Embeddings"),
        (("messages",), "EmbeddingRequest", "Embeddings"),
        (RERANK_PAIR, "RerankRequest", "Rerank"),
        *((pair, "ScoreRequest", "Score") for pair in SCORE_PAIRS),
    ),
}


def no_handler(runner: str) -> str:
    names = list(dict.fromkeys(name for _, name, _ in INVOCATION_KEYS[runner]))
    return f"Cannot find suitable handler for request. Expected one of: {names}"


# vLLM's `/reset_prefix_cache` <- every replica reset (a replica that failed fails the call instead): a reset here
# never waits for running requests, so it always succeeds.
RESET: dict[str, Callable[[int], object]] = {
    "success": lambda blocks_dropped: True,
}


# vLLM's `/kv_event_sources` <- one entry per replica that publishes KV events over ZMQ (GetKvEventSources), keyed
# by its position ("0", "1", ...) as vLLM keys its data-parallel ranks; each is vLLM's KVEventsConfig, a wildcard
# bind host replaced by the replica's own, so the subscriber can connect.
KV_EVENT_SOURCE: dict[str, Callable[[kv_events_pb2.KvEventSource, str], object]] = {
    "enable_kv_cache_events": lambda source, host: source.enable_kv_cache_events,
    "publisher": lambda source, host: source.publisher,
    "endpoint": lambda source, host: source.endpoint.replace("*", host),
    "replay_endpoint": lambda source, host: (
        source.replay_endpoint.replace("*", host) if source.HasField("replay_endpoint") else None
    ),
    "buffer_steps": lambda source, host: source.buffer_steps,
    "hwm": lambda source, host: source.hwm,
    "max_queue_size": lambda source, host: source.max_queue_size,
    "topic": lambda source, host: source.topic,
}


def kv_event_sources(sources: list[tuple[str, kv_events_pb2.KvEventSource]]) -> dict[str, dict]:
    """vLLM's body from (replica address, source) pairs."""
    return {
        str(rank): {name: value(source, address.rpartition(":")[0]) for name, value in KV_EVENT_SOURCE.items()}
        for rank, (address, source) in enumerate(sources)
    }


class VllmServer(VllmRl, VllmLora, ProfileRoutes, vllm_server_pb2_grpc.VllmServerServiceServicer):
    def __init__(self, fleet: FleetOperations, openai: OpenAIFrontDoor, hops: Hops):
        self.fleet = fleet
        self.openai = openai
        self.hops = hops
        self.generate = VllmGenerateFace(hops)
        self.derender = VllmDerender(hops, self.generate.model_name)
        self.derender_stream = VllmDerenderStream(hops, self.generate.model_name)

    async def Generate(self, request, context):
        async for event in self.generate(request, context):
            yield event

    @rpc_errors_typed
    async def DerenderChat(self, request, context):
        body = load_object(request.data)
        return await self._derender_face(body).chat(body, context)

    @rpc_errors_typed
    async def DerenderCompletion(self, request, context):
        body = load_object(request.data)
        return await self._derender_face(body).completion(body, context)

    def _derender_face(self, body: dict) -> VllmDerender | VllmDerenderStream:
        """vLLM's one path, two bodies: `stream: true` is the per-chunk form, false or absent the whole answer."""
        if body.get("stream") not in (None, False, True):
            raise fail(Reason.INVALID_REQUEST, "stream must be a boolean", "stream")
        return self.derender_stream if body.get("stream") else self.derender

    @rpc_errors_typed
    async def GetServerInfo(self, request, context):
        card, info = await served_model(self.hops, context)
        replicas = await self.fleet.replica_count()
        return json_body(server_info_body(card, info, replicas, request.config_format))

    async def GetLoad(self, request, context):
        engines = await self.fleet.answered_loads(context)
        return json_body({name: value(engines) for name, value in GET_LOAD.items()})

    async def GetServerLoad(self, request, context):
        engines = await self.fleet.answered_loads(context)
        return json_body({name: value(engines) for name, value in SERVER_LOAD.items()})

    async def Invocations(self, request, context):
        body = load_object(request.data)
        info = await rpc_errors_typed(self.hops.engine.GetModelInfo)(
            engine_pb2.GetModelInfoRequest(), timeout=context.time_remaining()
        )
        runner = "pooling" if info.runner == "pooling" else "generate"
        keys = INVOCATION_KEYS[runner]
        route = next((route for names, _, route in keys if all(body.get(n) is not None for n in names)), None)
        if route is None:
            raise fail(Reason.INVALID_REQUEST, no_handler(runner))
        if runner == "pooling":
            server = self if route in ("Rerank", "Score") else self.openai
            yield await getattr(server, route)(request, context)
            return
        async for event in getattr(self.openai, route)(request, context):
            yield event

    async def Score(self, request, context):
        if sglang_score.is_score_body(load_object(request.data)):  # SGLang's generative scoring (label_token_ids)
            return json_body(await sglang_score.score(self.hops, request.data, context))
        return await self._scoring(request, context, rerank=False)

    async def Rerank(self, request, context):
        return await self._scoring(request, context, rerank=True)

    async def _scoring(self, request, context, rerank: bool):
        parsed = scoring_request(request.data, rerank)
        rename = functools.partial(scoring_in_client_terms, request=parsed)
        answer, model = await embed(self.hops, parts(parsed), context, rename)
        return json_body((rerank_body if rerank else score_body)(answer, parsed, model))

    async def CohereEmbed(self, request, context):
        parsed = cohere_embed_request(request.data)
        rename = functools.partial(cohere_in_client_terms, request=parsed)
        answer, _ = await embed(self.hops, parsed.typed, context, rename, functools.partial(check_lengths, parsed))
        return json_body(cohere_body(answer, parsed))

    async def Pooling(self, request, context):
        parsed = pooling_request(request.data)
        rename = functools.partial(in_client_terms, body=request.data)
        answer, model = await embed(self.hops, parsed.typed, context, rename, chat=parsed.chat)
        if parsed.encoding in BYTES_ENCODINGS:
            return await bytes_answer(answer, model, parsed, "pooling", context)
        return json_body(pooling_body(answer, model, parsed))

    async def ChatCompletionsBatch(self, request, context):
        return json_body(await batch_chat(self.openai, request.data, context))

    async def GenerativeScoring(self, request, context):
        return json_body(await generative_scoring(self.hops, request.data, context))

    async def StructuredDecisions(self, request, context):
        return json_body(await structured_decision(self.hops, self.openai.labels, request.data, context))

    async def ResetPrefixCache(self, request, context):
        dropped = await self.fleet.reset_all(context)
        return json_body({name: value(dropped) for name, value in RESET.items()})

    async def KvEventSources(self, request, context):
        return json_body(kv_event_sources(await self.fleet.kv_event_sources(context)))
