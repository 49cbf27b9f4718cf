"""SGLang's server routes that routers probe (SMG, vllm-router), as a face over the contract (sglang_server.proto).

The stack stands for one SGLang server: `/get_model_info` and `/get_server_info` describe the served model
(render's model card, an engine's model info), `/loads` and `/v1/loads` have one entry per engine replica (as
SGLang has one per data-parallel rank), `/flush_cache` resets every replica's prefix cache, and
`/health_generate` generates one token through an engine. `/generate` itself is sglang_generate.py. Each JSON field comes from one row of the tables below;
the rest of SGLang's fields describe features we do not have (speculative decoding, LoRA, disaggregation) and
are SGLang's own values for a server without them.

Held against SMG 1.13 (its binary, run against a recording server: it asks `/loads?model=` first, falls back to
`/v1/loads?include=core,disagg,queues,memory`, and reads `/server_info` then `/get_server_info`, `/model_info`
then `/get_model_info`; `/server_info` is vLLM's route too, served by vllm_server_info.py with these fields in it) and SGLang's http_server.py and v1_loads (sections, `dp_rank`, 400 for a bad section).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from google.api import httpbody_pb2

from pipeline_svc.faces.sglang_generate import SGLangGenerate
from pipeline_svc.fleet_service import FleetOperations
from pipeline_svc.hops import Hops, rpc_errors_typed
from pipeline_svc.shaped_route import json_body
from scaleout.v1 import (
    common_pb2,
    engine_pb2,
    fleet_pb2,
    render_pb2,
    sglang_server_pb2_grpc,
)
from scaleout_common.errors import ServiceError, quote
from scaleout_common.reasons import Reason, fail
from scaleout_common.version import VERSION

Card = render_pb2.ModelCard
Info = engine_pb2.GetModelInfoResponse

# SGLang's `/get_model_info` <- render's card of the served model, an engine's model info.
MODEL_INFO: dict[str, Callable[[Card, Info], object]] = {
    "model_path": lambda card, info: card.root,
    "tokenizer_path": lambda card, info: card.root,
    "is_generation": lambda card, info: True,
    "preferred_sampling_params": lambda card, info: None,
    "weight_version": lambda card, info: "default",
    "has_image_understanding": lambda card, info: False,
    "has_audio_understanding": lambda card, info: False,
    "architectures": lambda card, info: [info.architecture],
}

# SGLang's `/get_server_info` (the fields SMG and vllm-router read) <- the same two.
SERVER_INFO: dict[str, Callable[[Card, Info], object]] = {
    "model_path": lambda card, info: card.root,
    "tokenizer_path": lambda card, info: card.root,
    "served_model_name": lambda card, info: card.id,
    "context_length": lambda card, info: card.max_model_len,
    "dtype": lambda card, info: info.dtype,
    "kv_cache_dtype": lambda card, info: info.kv_cache_dtype or "auto",
    "page_size": lambda card, info: info.kv_block_size,
    "max_total_num_tokens": lambda card, info: info.num_kv_blocks * info.kv_block_size,
    "max_running_requests": lambda card, info: info.max_running,
    "tp_size": lambda card, info: 1,
    "pp_size": lambda card, info: 1,
    # One server to the router: the gateway balances the engine replicas behind it.
    "dp_size": lambda card, info: 1,
    "disaggregation_mode": lambda card, info: "null",
    "is_embedding": lambda card, info: False,
    "weight_version": lambda card, info: "default",
    "version": lambda card, info: VERSION,
}

# One entry of SGLang's `loads` (SMG's SchedulerLoadSnapshot) <- one engine replica's GetLoad, and its index.
# Unlike SGLang, cache_hit_rate is since the replica started, and num_total_tokens counts the waiting prompts
# less their cached prefix (pending_prefill_tokens) where SGLang counts them whole.
LOAD_ENTRY: dict[str, Callable[[fleet_pb2.EngineLoad, int], object]] = {
    "worker": lambda e, rank: e.engine,
    "worker_type": lambda e, rank: "regular",
    "dp_rank": lambda e, rank: rank,
    "num_running_reqs": lambda e, rank: e.load.running,
    "num_waiting_reqs": lambda e, rank: e.load.waiting,
    "num_waiting_uncached_tokens": lambda e, rank: e.load.pending_prefill_tokens,
    "num_total_reqs": lambda e, rank: e.load.running + e.load.waiting,
    "num_used_tokens": lambda e, rank: e.load.kv_blocks_used * e.load.kv_block_size,
    "num_total_tokens": lambda e, rank: e.load.kv_blocks_used * e.load.kv_block_size + e.load.pending_prefill_tokens,
    "max_total_num_tokens": lambda e, rank: (e.load.kv_blocks_used + e.load.kv_blocks_free) * e.load.kv_block_size,
    "max_running_requests": lambda e, rank: e.load.max_running,
    "token_usage": lambda e, rank: round(
        e.load.kv_blocks_used / max(e.load.kv_blocks_used + e.load.kv_blocks_free, 1), 4
    ),
    "gen_throughput": lambda e, rank: round(e.load.generated_tokens_per_s, 2),
    "cache_hit_rate": lambda e, rank: round(
        e.load.prefix_cache_hit_tokens / max(e.load.prefix_cache_queried_tokens, 1), 4
    ),
    "utilization": lambda e, rank: round(e.load.utilization, 4),
}

# SGLang's optional sections of an entry, by their `include` name: (the entry's key, its value). Null where SGLang
# leaves a section it cannot fill; no disaggregation is SGLang's "null" mode with empty queues.
SECTIONS: dict[str, tuple[str, object]] = {
    "memory": ("memory", None),
    "spec": ("speculative", None),
    "lora": ("lora", None),
    "disagg": (
        "disaggregation",
        {
            "mode": "null",
            "prefill_bootstrap_queue_reqs": 0,
            "prefill_inflight_queue_reqs": 0,
            "decode_prealloc_queue_reqs": 0,
            "decode_transfer_queue_reqs": 0,
            "decode_retracted_queue_reqs": 0,
            "kv_transfer_speed_gb_s": 0.0,
            "kv_transfer_latency_ms": 0.0,
        },
    ),
    "queues": ("queues", None),
}
CORE, ALL = "core", "all"

# The totals SMG's own `/loads` adds (when there are entries) <- the entries.
AGGREGATE: dict[str, Callable[[list[dict]], object]] = {
    "total_running_reqs": lambda ranks: sum(r["num_running_reqs"] for r in ranks),
    "total_waiting_reqs": lambda ranks: sum(r["num_waiting_reqs"] for r in ranks),
    "total_reqs": lambda ranks: sum(r["num_total_reqs"] for r in ranks),
    "avg_token_usage": lambda ranks: sum(r["token_usage"] for r in ranks) / len(ranks),
    "avg_throughput": lambda ranks: sum(r["gen_throughput"] for r in ranks) / len(ranks),
    "avg_utilization": lambda ranks: sum(r["utilization"] for r in ranks) / len(ranks),
}

HEALTH_GENERATE_TIMEOUT_S = 20.0  # SGLang's HEALTH_CHECK_TIMEOUT
HEALTHY = httpbody_pb2.HttpBody(content_type="text/plain")  # SGLang answers 200 with an empty body
FLUSHED = httpbody_pb2.HttpBody(content_type="text/plain; charset=utf-8", data=b"Cache flushed.\n")


def sections(include: str) -> list[str]:
    """The optional sections `include` asks for (SGLang's default: all); an unknown name is a 400."""
    names = {name.strip() for name in include.split(",") if name.strip()} or {ALL}
    unknown = names - {CORE, ALL, *SECTIONS}
    if unknown:
        valid = sorted({CORE, ALL, *SECTIONS})
        raise fail(
            Reason.INVALID_REQUEST, f"include: unknown sections {quote(sorted(unknown))}; valid: {valid}", "include"
        )
    return list(SECTIONS) if ALL in names else [name for name in SECTIONS if name in names]


def load_entry(engine: fleet_pb2.EngineLoad, rank: int, wanted: list[str]) -> dict:
    entry = {name: value(engine, rank) for name, value in LOAD_ENTRY.items()}
    entry.update(SECTIONS[name] for name in wanted)
    return entry


def loads_body(engines: list[fleet_pb2.EngineLoad], wanted: list[str], dp_rank: int | None) -> dict:
    ranks = [load_entry(e, rank, wanted) for rank, e in enumerate(engines) if dp_rank in (None, rank)]
    body = {
        "timestamp": datetime.now(UTC).isoformat(),
        "version": VERSION,
        "dp_rank_count": len(ranks),
        "loads": ranks,
    }
    if ranks:
        body["aggregate"] = {name: total(ranks) for name, total in AGGREGATE.items()}
    return body


async def served_model(hops: Hops, context) -> tuple[Card, Info]:
    """The served model's card (its first name) and an engine's model info."""
    models = await hops.render.ListModels(render_pb2.ListModelsRequest(), timeout=context.time_remaining())
    info = await hops.engine.GetModelInfo(engine_pb2.GetModelInfoRequest(), timeout=context.time_remaining())
    return models.data[0], info


def server_info(card: Card, info: Info) -> dict:
    """SGLang's `/get_server_info` body (also part of vLLM's `/server_info`: vllm_server_info.py)."""
    return {name: value(card, info) for name, value in SERVER_INFO.items()}


class SGLangServer(sglang_server_pb2_grpc.SGLangServerServiceServicer):
    def __init__(self, hops: Hops, fleet: FleetOperations):
        self.hops = hops
        self.fleet = fleet
        self.generate = SGLangGenerate(hops)

    @rpc_errors_typed
    async def GetModelInfo(self, request, context):
        card, info = await served_model(self.hops, context)
        return json_body({name: value(card, info) for name, value in MODEL_INFO.items()})

    @rpc_errors_typed
    async def GetServerInfo(self, request, context):
        return json_body(server_info(*await served_model(self.hops, context)))

    @rpc_errors_typed
    async def HealthGenerate(self, request, context):
        remaining = context.time_remaining()
        probe = engine_pb2.GenerateRequest(
            token_ids=[0], sampling_params=common_pb2.SamplingParams(temperature=0.0, max_tokens=1)
        )
        result = await self.hops.engine.GenerateUnary(
            probe, timeout=min(remaining or HEALTH_GENERATE_TIMEOUT_S, HEALTH_GENERATE_TIMEOUT_S)
        )
        if result.HasField("error"):
            raise ServiceError.from_status(result.error)
        return HEALTHY

    @rpc_errors_typed
    async def GetLoads(self, request, context):
        if request.format not in ("", "json"):
            reason = Reason.UNSUPPORTED_FIELD if request.format == "prometheus" else Reason.INVALID_REQUEST
            raise fail(reason, f"format {quote(request.format)}: only json is served", "format")
        wanted = sections(request.include)
        engines = await self.fleet.answered_loads(context)
        if request.model:
            models = await self.hops.render.ListModels(render_pb2.ListModelsRequest(), timeout=context.time_remaining())
            if request.model not in {card.id for card in models.data}:
                engines = []  # SMG's own /loads: a model nobody serves has no entries
        dp_rank = request.dp_rank if request.HasField("dp_rank") else None
        return json_body(loads_body(engines, wanted, dp_rank))

    async def FlushCache(self, request, context):
        if request.timeout < 0 or request.timeout != request.timeout:  # SGLang's `ge=0.0`
            raise fail(Reason.INVALID_REQUEST, "timeout must be a number of seconds >= 0", "timeout")
        await self.fleet.reset_all(context)
        return FLUSHED

    async def Generate(self, request, context):
        """SGLang's `/generate` (faces/sglang_generate.py)."""
        async for event in self.generate(request, context):
            yield event
