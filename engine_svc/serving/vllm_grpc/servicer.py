"""`vllm.grpc.engine.VllmEngine` on the engine's port: the face that SMG's gRPC mode (and any vLLM gRPC client)
drives. Every call goes through the typed servicer's own steps (admission, tenancy, limits, errors, telemetry),
so a request through this face is refused, counted and scoped exactly as one through `scaleout.v1.EngineService`;
this module only reshapes (mapping.py holds the field table; kv_events.py SubscribeKvEvents').
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime
from importlib import metadata

from smg_grpc_proto.generated import common_pb2 as smg_common
from smg_grpc_proto.generated import vllm_engine_pb2 as vllm
from smg_grpc_proto.generated import vllm_engine_pb2_grpc

from engine_svc.serving.pooling import counted_load
from engine_svc.serving.streaming import collect, stream_responses
from engine_svc.serving.vllm_grpc import kv_events, mapping
from engine_svc.serving.vllm_grpc.tokenizer_zip import CHUNK_BYTES, tokenizer_zip
from scaleout.v1 import control_pb2, engine_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.identity import caller, require_trusted
from scaleout_common.reasons import Reason, fail
from scaleout_common.telemetry.call_summary import report_engine_timing

add_VllmEngineServicer_to_server = vllm_engine_pb2_grpc.add_VllmEngineServicer_to_server
SERVICE_NAME = vllm.DESCRIPTOR.services_by_name["VllmEngine"].full_name
# --kv-role in vLLM's KVTransferConfig names (GetServerInfo.kv_role); the face's Generate still refuses
# kv_transfer_params: P/D runs through the HTTP routes (docs/disaggregated.md).
KV_ROLES = {"prefill": "kv_producer", "decode": "kv_consumer", "both": "kv_both"}


def _version() -> str:
    try:
        return metadata.version("scaleout")
    except metadata.PackageNotFoundError:
        return ""


class VllmEngineServicer(vllm_engine_pb2_grpc.VllmEngineServicer):
    def __init__(self, typed, control):
        """`typed`: the EngineServicer (its admission and abort steps); `control`: the EngineControlServicer."""
        self.typed = typed
        self.control = control
        self.started = time.time()

    @property
    def service(self):
        return self.typed.service

    async def Generate(self, request, context):
        loaded = self.typed.loaded
        ours = mapping.generate_request(request, loaded.limits.max_model_len)
        await self.typed._compile(ours)
        state, interval, request_id, _ = await self.typed._submit(ours, context)  # it refuses KV steps
        prompt_ids = ours.token_ids
        if request.stream:
            async for message in self._stream(state, interval, request_id, prompt_ids):
                yield message
        else:
            whole = await collect(self.typed.engine, state, request_id)
            _raise_error(whole)
            for choice in whole.choices:
                yield self._complete(whole, choice, choice.token_ids, len(choice.token_ids), prompt_ids)
        report_engine_timing(**state.timings())

    async def _stream(self, state, interval, request_id, prompt_ids):
        totals: dict[int, int] = {}
        prompt = engine_pb2.PromptInfo()
        async for message in stream_responses(self.typed.engine, state, interval, request_id, timed=False):
            _raise_error(message)
            if message.HasField("prompt"):
                prompt = message.prompt
            for choice in message.choices:
                first = choice.index not in totals
                totals[choice.index] = totals.get(choice.index, 0) + len(choice.token_ids)
                chunk = vllm.GenerateStreamChunk(
                    token_ids=choice.token_ids,
                    prompt_tokens=prompt.num_tokens,
                    completion_tokens=totals[choice.index],
                    cached_tokens=prompt.cached_tokens,
                    index=choice.index,
                )
                if choice.HasField("logprobs"):
                    chunk.output_logprobs.CopyFrom(mapping.output_logprobs(choice.token_ids, choice.logprobs))
                if first and prompt.HasField("logprobs"):
                    chunk.input_logprobs.CopyFrom(mapping.input_logprobs(prompt_ids, prompt.logprobs))
                yield vllm.GenerateResponse(chunk=chunk)
                if choice.finish_reason:
                    whole = engine_pb2.GenerateResponse(prompt=prompt)
                    yield self._complete(whole, choice, choice.token_ids, totals[choice.index], prompt_ids)

    @staticmethod
    def _complete(whole, choice, output_ids, total: int, prompt_ids) -> vllm.GenerateResponse:
        """One choice's GenerateComplete; `whole` carries the prompt info."""
        complete = vllm.GenerateComplete(
            output_ids=output_ids,
            finish_reason=mapping.FINISH_REASONS.get(choice.finish_reason, "stop"),
            prompt_tokens=whole.prompt.num_tokens,
            completion_tokens=total,
            cached_tokens=whole.prompt.cached_tokens,
            index=choice.index,
            **mapping.stop_fields(choice),
        )
        if choice.HasField("logprobs"):
            complete.output_logprobs.CopyFrom(mapping.output_logprobs(output_ids, choice.logprobs))
        if whole.prompt.HasField("logprobs"):
            complete.input_logprobs.CopyFrom(mapping.input_logprobs(prompt_ids, whole.prompt.logprobs))
        return vllm.GenerateResponse(complete=complete)

    async def Abort(self, request, context):
        await self.typed.Abort(engine_pb2.AbortRequest(request_ids=request.request_ids), context)
        return vllm.AbortResponse()

    async def HealthCheck(self, request, context):
        healthy = self.service.healthy()  # the server answers NOT_READY / DRAINING before this is reached
        return vllm.HealthCheckResponse(healthy=healthy, message="Health" if healthy else "the step loop stalled")

    async def GetModelInfo(self, request, context):
        loaded = self.typed.loaded
        limits, facts = loaded.limits, loaded.facts
        return vllm.GetModelInfoResponse(
            model_path=facts.path or loaded.model_name,
            is_generation=True,
            max_context_length=limits.max_model_len,
            vocab_size=limits.vocab_size,
            served_model_name=loaded.model_name,
            tokenizer_path=facts.path,
            model_type=facts.model_type,
            architectures=facts.architectures or [loaded.architecture],
            eos_token_ids=limits.eos_token_ids,
            pad_token_id=facts.pad_token_id or 0,
            bos_token_id=facts.bos_token_id or 0,
            max_req_input_len=limits.max_model_len,
            default_sampling_params_json=json.dumps(facts.sampling_defaults, separators=(",", ":"))
            if facts.sampling_defaults
            else "",
        )

    async def GetServerInfo(self, request, context):
        loaded = self.typed.loaded
        load = counted_load(loaded.engine, loaded.pooler)
        return vllm.GetServerInfoResponse(
            active_requests=load.running + load.waiting,
            uptime_seconds=time.time() - self.started,
            server_type="vllm-grpc",
            data_parallel_size=1,
            kv_cache_dtype=loaded.kv_cache_dtype or "auto",
            block_size=load.kv_block_size,
            model_dtype=f"torch.{loaded.dtype}",
            max_num_seqs=load.max_running,
            kv_role=KV_ROLES[self.service.kv.role],
            kv_engine_id=self.service.kv.address.engine_id,
        )

    async def GetLoads(self, request, context):
        require_trusted(caller(context), "GetLoads")
        if request.HasField("dp_rank") and request.dp_rank != 0:
            raise fail(Reason.UNSUPPORTED_FIELD, "this engine has one data-parallel rank (0)", "dp_rank")
        load = counted_load(self.typed.loaded.engine, self.typed.loaded.pooler)
        blocks = load.kv_blocks_used + load.kv_blocks_free
        scheduler = vllm.SchedulerLoad(
            num_running_reqs=load.running,
            num_waiting_reqs=load.waiting,
            num_total_reqs=load.running + load.waiting,
            num_used_tokens=load.kv_blocks_used * load.kv_block_size,
            max_total_num_tokens=blocks * load.kv_block_size,
            token_usage=load.kv_blocks_used / max(blocks, 1),
            gen_throughput=load.generated_tokens_per_s,
            cache_hit_rate=load.prefix_cache_hit_tokens / max(load.prefix_cache_queried_tokens, 1),
            utilization=load.utilization,
            max_running_requests=load.max_running,
            num_waiting_uncached_tokens=load.pending_prefill_tokens,
        )
        return vllm.GetLoadsResponse(
            timestamp=datetime.now(UTC).isoformat(), version=_version(), dp_rank_count=1, loads=[scheduler]
        )

    async def GetTokenizer(self, request, context):
        data = tokenizer_zip(self.typed.loaded.facts.path)
        digest = hashlib.sha256(data).hexdigest()
        for start in range(0, len(data), CHUNK_BYTES):  # the digest rides on the last chunk only
            last = start + CHUNK_BYTES >= len(data)
            yield smg_common.GetTokenizerChunk(data=data[start : start + CHUNK_BYTES], sha256=digest if last else "")

    async def FlushCache(self, request, context):
        # The reset drops only blocks no request holds and never waits (request.timeout_s has nothing to bound).
        reset = await self.control.ResetPrefixCache(control_pb2.ResetPrefixCacheRequest(), context)
        return smg_common.FlushCacheResponse(success=True, message=f"{reset.blocks_dropped} blocks dropped")

    async def Embed(self, request, context):
        raise fail(Reason.RPC_NOT_SERVED, "this engine serves generative models only: no Embed")

    async def StartProfile(self, request, context):
        raise fail(Reason.RPC_NOT_SERVED, "this engine has no profiler to start")

    async def StopProfile(self, request, context):
        raise fail(Reason.RPC_NOT_SERVED, "this engine has no profiler to stop")

    async def SubscribeKvEvents(self, request, context):
        require_trusted(caller(context), "SubscribeKvEvents")
        async for batch in kv_events.stream(self.typed.loaded.engine, request):  # kv_events.py maps them
            yield batch


def _raise_error(message: engine_pb2.GenerateResponse) -> None:
    """A failure after the start ends the call with its status, as vLLM's servicer does."""
    if message.HasField("error"):
        raise ServiceError.from_status(message.error)
