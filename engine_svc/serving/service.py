"""EngineService: the gRPC face of the engine (Generate, GenerateUnary, Abort, GetModelInfo, GetLoad, GetMetrics)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import uuid
from collections.abc import Sequence

import grpc
from google.api import httpbody_pb2

from engine_svc.scheduling.admission import admit, structured
from engine_svc.scheduling.speculation import parse_speculative_config
from engine_svc.serving import telemetry as _telemetry  # noqa: F401  (registers the readers of the engine's messages)
from engine_svc.serving import tenancy
from engine_svc.serving.api_servers import ApiServers
from engine_svc.serving.control import EngineControlServicer
from engine_svc.serving.core_process import EngineProcess
from engine_svc.serving.engine_api import EngineAPI
from engine_svc.serving.kv_transfer.peer import KvPeer
from engine_svc.serving.loader import LoadedEngine, core_in_child_process, load_engine
from engine_svc.serving.loras import lora_config
from engine_svc.serving.pooling import counted_load, pooling_runner
from engine_svc.serving.streaming import collect, stream_responses
from engine_svc.serving.vllm_grpc.servicer import SERVICE_NAME as VLLM_SERVICE
from engine_svc.serving.vllm_grpc.servicer import VllmEngineServicer, add_VllmEngineServicer_to_server
from engine_svc.serving.vllm_metrics import CONTENT_TYPE, VllmMetrics
from scaleout.v1 import control_pb2_grpc, engine_pb2, engine_pb2_grpc, kv_transfer_pb2_grpc
from scaleout_common.identity import caller, require_trusted
from scaleout_common.reasons import Reason, fail
from scaleout_common.telemetry.call_summary import report_engine_timing

log = logging.getLogger(__name__)


def _speculative(text: str) -> engine_pb2.SpeculativeConfig | None:
    """--speculative-config as resolved (checked at start); a draft model named by its folder's last part."""
    config = parse_speculative_config(text)
    if config is None:
        return None
    draft = config.method == "draft_model"
    return engine_pb2.SpeculativeConfig(
        method=config.method,
        num_speculative_tokens=config.num_speculative_tokens,
        prompt_lookup_min=config.prompt_lookup_min,
        prompt_lookup_max=config.prompt_lookup_max,
        model=os.path.basename(config.model.rstrip("/")) if draft else config.method,
        draft_sample_method="greedy",
    )


class EngineServicer(engine_pb2_grpc.EngineServiceServicer):
    """Registered before loading; the server refuses calls (NOT_READY) until `service.loaded` is set."""

    def __init__(self, service: EngineService):
        self.service = service

    @property
    def loaded(self) -> LoadedEngine:
        loaded = self.service.loaded
        assert loaded is not None  # the server refuses calls until load() has set it
        return loaded

    @property
    def engine(self) -> EngineAPI:
        return self.loaded.engine

    async def _compile(self, request) -> None:
        """A constrained request's grammar, compiled (or found in the cache) off the event loop within the time
        bound, before the request is admitted: one that does not compile is refused here (INVALID_GRAMMAR,
        GRAMMAR_TOO_COMPLEX)."""
        if request.sampling_params.HasField("structured_outputs"):
            constraint, _ = structured(request.sampling_params, self.loaded.limits)
            if constraint is not None:
                await self.engine.compile_grammar(constraint)

    async def _submit(self, request, context):
        """The request admitted under its tenant's key (tenancy.py), its KV step's pull done (kv_transfer/); its
        state, stream interval, public id and the pull's transport ("" without one)."""
        if self.loaded.pooler is not None:
            raise fail(Reason.ROUTE_NOT_ENABLED, "this engine pools (--runner pooling): it does not generate")
        who = caller(context)
        tenancy.check_priority(who, request)
        kv = self.service.kv
        step = kv.step(request)
        request_id = request.request_id or uuid.uuid4().hex
        key, seqs, interval = admit(request, self.loaded.limits, tenancy.engine_key(who, request_id))
        way = "" if step is None else await kv.prepare(step, seqs, context.time_remaining())
        return self.engine.submit(key, seqs, who.client), interval, request_id, way

    async def Generate(self, request, context):
        await self._compile(request)
        state, interval, request_id, way = await self._submit(request, context)
        async for message in stream_responses(self.engine, state, interval, request_id):
            if message.HasField("kv_handoff"):
                self.service.kv.answer(message, request)
            if way and message.HasField("prompt"):
                message.prompt.kv_transport = way
            yield message
        report_engine_timing(**state.timings())

    async def GenerateUnary(self, request, context):
        await self._compile(request)
        state, _, request_id, way = await self._submit(request, context)
        response = await collect(self.engine, state, request_id)
        if response.HasField("kv_handoff"):
            self.service.kv.answer(response, request)
        if way:
            response.prompt.kv_transport = way
        report_engine_timing(**state.timings())
        return response

    async def Embed(self, request, context):
        pooler = self.loaded.pooler
        if pooler is None:
            raise fail(
                Reason.ROUTE_NOT_ENABLED, "this engine generates: embeddings need one started with --runner pooling"
            )
        tenancy.check_priority(caller(context), request)
        return await pooler.embed(request, request.request_id or uuid.uuid4().hex)

    async def Abort(self, request, context):
        if not request.request_ids:
            raise fail(Reason.MISSING_REQUEST_IDS, "request_ids must name at least one request", "request_ids")
        wanted, client = tenancy.abort_scope(caller(context), request.request_ids)
        mine = [key for key in list(self.engine.requests) if tenancy.reaches(key, wanted, client)]
        keys, _ = self.engine.abort(mine) if mine else ([], [])
        keys += await self.engine.abort_elsewhere(sorted(wanted), client)
        aborted = list(dict.fromkeys(tenancy.public_id(key) for key in keys))
        not_found = [rid for rid in request.request_ids if rid not in aborted]
        await context.send_initial_metadata(((tenancy.ABORTED_HEADER, str(len(aborted))),))
        return engine_pb2.AbortResponse(aborted=aborted, not_found=not_found)

    async def GetModelInfo(self, request, context):
        loaded, limits, load = self.loaded, self.loaded.limits, counted_load(self.engine, self.loaded.pooler)
        return engine_pb2.GetModelInfoResponse(
            model=loaded.model_name,
            vocab_size=limits.vocab_size,
            eos_token_ids=limits.eos_token_ids,
            max_model_len=limits.max_model_len,
            tokenizer_fingerprint=limits.tokenizer_fingerprint,
            architecture=loaded.architecture,
            dtype=loaded.dtype,
            device=loaded.device,
            backend=loaded.backend,
            quantization=loaded.quantization,
            kv_cache_dtype=loaded.kv_cache_dtype,
            logprobs_mode=loaded.logprobs_mode,
            head_dtype=loaded.head_dtype,
            kv_block_size=load.kv_block_size,
            num_kv_blocks=load.kv_blocks_used + load.kv_blocks_free,
            max_running=load.max_running,
            kv_role=self.service.kv.role,
            kv_layout=self.service.kv.layout if self.service.kv.engine is not None else None,
            weight_version=self.engine.weight_version,
            weight_transfer_backend=self.service.args.weight_transfer_backend,
            speculative_config=_speculative(self.service.args.speculative_config),
            runner="generate" if loaded.pooler is None else "pooling",
            lora_config=lora_config(self.service.args) if limits.loras is not None else None,
        )

    async def GetLoad(self, request, context):
        require_trusted(caller(context), "GetLoad")
        return counted_load(self.engine, self.loaded.pooler)

    async def GetMetrics(self, request, context):
        require_trusted(caller(context), "GetMetrics")
        if not self.service.observed:
            raise fail(Reason.METRICS_OFF, "this engine keeps no metrics (--metrics-port -1)")
        return httpbody_pb2.HttpBody(content_type=CONTENT_TYPE, data=self.service.vllm.exposition())


class KvTransferServicer(kv_transfer_pb2_grpc.KvTransferServiceServicer):
    """KvTransferService, served by the engine's KvPeer once loaded."""

    def __init__(self, service: EngineService):
        self.service = service

    async def PullKvBlocks(self, request, context):
        async for chunk in self.service.kv.PullKvBlocks(request, context):
            yield chunk

    async def ShareKvCache(self, request, context):
        return await self.service.kv.ShareKvCache(request, context)


class EngineService:
    service_names: Sequence[str] = (
        "scaleout.v1.EngineService",
        "scaleout.v1.EngineControlService",
        "scaleout.v1.KvTransferService",
        VLLM_SERVICE,
    )

    def __init__(self, args, build=None, attach: tuple | None = None, tallies: tuple | None = None):
        """`build()` returns a LoadedEngine (default: load from the flags); tests and benches pass their own,
        picklable (a module-level function or a partial of one) when the engine core runs in a child process.
        `attach`: (commands, results, ready) of an API server after the first (api_servers.py), which serves
        the first's core and sets `ready` once it does; `tallies`: (the first's shared tallies, this one's row)."""
        if args.api_servers < 1 or (args.api_servers > 1 and args.engine_core == "thread"):
            raise SystemExit("--api-servers: at least 1, and more than 1 only with the engine core in a process")
        if getattr(args, "kv_role", "both") != "both" and core_in_child_process(args):
            raise SystemExit(
                f"--kv-role {args.kv_role}: KV steps need the engine core in the server's process "
                "(--engine-core auto or thread, one API server)"
            )
        if pooling_runner(args) and core_in_child_process(args):
            raise SystemExit(
                "--runner pooling: the pooler needs the engine core in the server's process "
                "(--engine-core auto or thread, one API server)"
            )
        self.args = args
        self._build = build or functools.partial(load_engine, args)
        self._attach = attach
        self.loaded: LoadedEngine | None = None
        self.port = 0
        self.api_servers = ApiServers()
        self.vllm = VllmMetrics()
        self._tallies = tallies or (None, 0)
        self.observed = False  # the telemetry feeds the metrics (off with --metrics-port -1)
        self._kv: KvPeer | None = None  # set once loaded

    @property
    def kv(self) -> KvPeer:
        assert self._kv is not None  # the server refuses calls until load() has set it
        return self._kv

    @property
    def shares_port(self) -> bool:
        return self.args.api_servers > 1

    def listening(self, port: int) -> None:
        self.port = port
        host = self.args.host
        host = socket.gethostname() if host in ("", "0.0.0.0", "::", "[::]") else host
        self.vllm.engine_id = self.args.engine_id or f"{host}:{port}"

    def register(self, server: grpc.aio.Server) -> None:
        typed, control = EngineServicer(self), EngineControlServicer(self)
        engine_pb2_grpc.add_EngineServiceServicer_to_server(typed, server)
        kv_transfer_pb2_grpc.add_KvTransferServiceServicer_to_server(KvTransferServicer(self), server)
        control_pb2_grpc.add_EngineControlServiceServicer_to_server(control, server)
        add_VllmEngineServicer_to_server(VllmEngineServicer(typed, control), server)

    async def load(self) -> None:
        if self._attach is not None:
            commands, results, ready = self._attach
            self.loaded = await asyncio.to_thread(EngineProcess.attach, commands, results, self.args.stall_timeout_s)
            shared, row = self._tallies
            self.vllm.bind(self.loaded, shared=shared, row=row)
            ready.set()
        elif core_in_child_process(self.args):
            self.loaded, others = await asyncio.to_thread(
                EngineProcess.launch, self._build, self.args.stall_timeout_s, self.args.api_servers
            )
            tallies = self.vllm.bind(self.loaded, api_servers=self.args.api_servers)
            self.api_servers = await asyncio.to_thread(ApiServers.start, self.args, others, self.port, tallies.shared)
        else:
            self.loaded = await asyncio.to_thread(self._build)
            self.vllm.bind(self.loaded)
        self.loaded.engine.max_queue_wait_s = self.args.max_queue_wait_s  # this server's front checks it
        loaded = self.loaded
        self._kv = KvPeer(self.args, self.port, loaded.engine, loaded.model_name, loaded.limits.tokenizer_fingerprint)
        self.loaded.engine.start(asyncio.get_running_loop())

    def watch_metrics(self, llm) -> None:
        """Scheduler gauges for Prometheus (scaleout_common.telemetry.metrics), read at scrape time."""

        def read(value):
            return lambda: value(self.loaded.engine) if self.loaded is not None else 0

        def kv_usage(engine) -> float:
            load = engine.load()
            return load.kv_blocks_used / max(load.kv_blocks_used + load.kv_blocks_free, 1)

        def kv_cached(engine) -> float:
            load = engine.load()
            return load.kv_blocks_cached / max(load.kv_blocks_used + load.kv_blocks_free, 1)

        def prefix_hits(engine) -> float:
            load = engine.load()
            return load.prefix_cache_hit_tokens / max(load.prefix_cache_queried_tokens, 1)

        def spec_acceptance(engine) -> float:
            load = engine.load()
            return load.spec_decode_num_accepted_tokens / max(load.spec_decode_num_draft_tokens, 1)

        def counted(name: str):  # a pooler's inputs counted with the engine's sequences (pooling.counted_load)
            return lambda: (
                getattr(counted_load(self.loaded.engine, self.loaded.pooler), name) if self.loaded is not None else 0
            )

        llm.watch(
            queue_depth=counted("waiting"),
            running=counted("running"),
            kv_cache_usage=read(kv_usage),
            kv_cache_cached=read(kv_cached),
            prefix_cache_hit=read(prefix_hits),
            spec_decode_acceptance=read(spec_acceptance),
        )
        # The vllm: series see the same calls; they are engine-wide, so only the first API server's port shows
        # them (a scrape of every port would count them once per API server).
        llm.observers.append(self.vllm)
        self.observed = True
        if self._attach is None:
            llm.registry.register(self.vllm)

    def healthy(self) -> bool:
        return self.loaded is None or self.loaded.engine.healthy()

    async def drain(self) -> None:
        """In-flight streams keep running during the server's grace period; new calls are refused by the server.
        The other API servers drain alongside."""
        self.api_servers.drain()

    async def close(self) -> None:
        """The other API servers end (their streams done) before the core stops."""
        await asyncio.to_thread(self.api_servers.stop, self.args.drain_delay_s + self.args.drain_grace_s + 5)
        if self.loaded is not None:
            self.loaded.engine.stop()
