"""EngineControlService: control operations on this engine replica, admin-scoped (scaleout_common.identity).

Over REST they reach every replica at once through the one-hop service (FleetService, pipeline_svc/fleet.py; the
RL routes on vLLM's paths: pipeline_svc/faces/vllm_rl.py). SubscribeKvEvents streams the prefix cache's events
(kv_relay.py) in our contract (kv_events.proto). The RL operations (pause, sleep, weight transfer) run on the step
loop (controls.py); here they are checked and scoped.
"""

from __future__ import annotations

from dataclasses import asdict

from engine_svc.scheduling import kv_events
from engine_svc.serving import kv_relay
from engine_svc.serving.kv_hub import KvBatch
from engine_svc.serving.vllm_kv_events import config as vllm_kv_config
from scaleout.v1 import common_pb2, control_pb2, control_pb2_grpc, kv_events_pb2
from scaleout_common.identity import caller, require_trusted
from scaleout_common.reasons import Reason, fail

SNAPSHOT_BLOCKS = 4096  # blocks per message of a snapshot (a full H200's table is ~10^5 blocks)


class EngineControlServicer(control_pb2_grpc.EngineControlServiceServicer):
    def __init__(self, service):
        self.service = service  # EngineService: its engine is there once loaded (the server refuses calls before)

    async def ResetPrefixCache(self, request, context):
        require_trusted(caller(context), "ResetPrefixCache")
        dropped = await self.service.loaded.engine.reset_prefix_cache()
        return control_pb2.ResetPrefixCacheResponse(blocks_dropped=dropped)

    async def GetKvEventSources(self, request, context):
        require_trusted(caller(context), "GetKvEventSources")
        config = vllm_kv_config.parse(self.service.args.kv_events_config)
        if not config.zmq:
            return kv_events_pb2.GetKvEventSourcesResponse()
        return kv_events_pb2.GetKvEventSourcesResponse(source=kv_events_pb2.KvEventSource(**asdict(config)))

    async def _run(self, context, rpc: str, op: str, *args):
        require_trusted(caller(context), rpc)
        return await self.service.loaded.engine.control(op, *args)

    async def StartProfile(self, request, context):
        path = await self._run(context, "StartProfile", "start_profile", request)
        return control_pb2.StartProfileResponse(trace_file=path)

    async def StopProfile(self, request, context):
        path, steps = await self._run(context, "StopProfile", "stop_profile")
        return control_pb2.StopProfileResponse(trace_file=path, steps=steps)

    async def Pause(self, request, context):
        aborted = await self._run(context, "Pause", "pause", _mode(request.mode))
        return control_pb2.PauseResponse(aborted=aborted)

    async def Resume(self, request, context):
        await self._run(context, "Resume", "resume")
        return control_pb2.ResumeResponse()

    async def GetPauseState(self, request, context):
        paused, mode = await self._run(context, "GetPauseState", "pause_state")
        return control_pb2.GetPauseStateResponse(paused=paused, mode=mode)

    async def Sleep(self, request, context):
        level = request.level if request.HasField("level") else 1
        if level not in (0, 1, 2):
            raise fail(Reason.INVALID_REQUEST, f"level {level} is not 0, 1 or 2", "level")
        await self._run(context, "Sleep", "sleep", level, _mode(request.mode))
        return control_pb2.SleepResponse()

    async def WakeUp(self, request, context):
        if unknown := [t for t in request.tags if t not in control_pb2.SleepTag.values() or not t]:
            raise fail(Reason.INVALID_REQUEST, f"unknown sleep tags {unknown}", "tags")
        awake = await self._run(context, "WakeUp", "wake_up", list(request.tags))
        return control_pb2.WakeUpResponse(awake=awake)

    async def GetSleepState(self, request, context):
        sleeping, level, asleep = await self._run(context, "GetSleepState", "sleep_state")
        return control_pb2.GetSleepStateResponse(sleeping=sleeping, level=level, asleep=asleep)

    async def InitWeightTransfer(self, request, context):
        backend = self.service.args.weight_transfer_backend
        joined = await self._run(context, "InitWeightTransfer", "init_transfer", request, backend)
        return control_pb2.InitWeightTransferResponse(backend=joined)

    async def StartWeightUpdate(self, request, context):
        await self._run(context, "StartWeightUpdate", "start_update")
        return control_pb2.StartWeightUpdateResponse()

    async def UpdateWeights(self, request, context):
        tensors = await self._run(context, "UpdateWeights", "update_weights", request)
        return control_pb2.UpdateWeightsResponse(tensors=tensors)

    async def FinishWeightUpdate(self, request, context):
        version = request.weight_version if request.HasField("weight_version") else None
        version, dropped = await self._run(context, "FinishWeightUpdate", "finish_update", version)
        return control_pb2.FinishWeightUpdateResponse(weight_version=version, blocks_dropped=dropped)

    async def SetWeightVersion(self, request, context):
        await self._run(context, "SetWeightVersion", "set_version", request.weight_version)
        return control_pb2.SetWeightVersionResponse()

    async def GetWeightInfo(self, request, context):
        version, group = await self._run(context, "GetWeightInfo", "weight_info")
        backend = self.service.args.weight_transfer_backend
        return control_pb2.GetWeightInfoResponse(
            weight_version=version, backend=backend, world_size=1, group_name=group
        )

    async def ShutdownWeightTransfer(self, request, context):
        await self._run(context, "ShutdownWeightTransfer", "shutdown_transfer")
        return control_pb2.ShutdownWeightTransferResponse()

    async def GetWeightChecksums(self, request, context):
        checksums = await self._run(context, "GetWeightChecksums", "checksums")
        return control_pb2.GetWeightChecksumsResponse(checksums=checksums)

    async def ZeroWeights(self, request, context):
        await self._run(context, "ZeroWeights", "zero_weights")
        return control_pb2.ZeroWeightsResponse()

    async def AbortRequests(self, request, context):
        aborted = await self._run(context, "AbortRequests", "abort", list(request.request_ids))
        return control_pb2.AbortRequestsResponse(aborted=aborted)

    async def ReleaseKvCache(self, request, context):
        await self._run(context, "ReleaseKvCache", "release_kv")
        return control_pb2.ReleaseKvCacheResponse()

    async def LoadLoraAdapter(self, request, context):
        if not request.lora_name or not request.lora_path:  # vLLM's words
            raise fail(Reason.INVALID_REQUEST, "Both 'lora_name' and 'lora_path' must be provided.", "lora_name")
        name = request.lora_name
        card = await self._run(
            context, "LoadLoraAdapter", "load_lora", name, request.lora_path, request.base_model_name
        )
        self._served_loras()[name] = card  # this API server's admission (others learn it at their start only)
        return common_pb2.LoadLoraAdapterResponse(lora_id=card.id)

    async def UnloadLoraAdapter(self, request, context):
        await self._run(context, "UnloadLoraAdapter", "unload_lora", request.lora_name)
        self._served_loras().pop(request.lora_name, None)
        return common_pb2.UnloadLoraAdapterResponse()

    def _served_loras(self) -> dict:
        limits = self.service.loaded.limits
        if limits.loras is None:
            limits.loras = {}
        return limits.loras

    async def SubscribeKvEvents(self, request, context):
        require_trusted(caller(context), "SubscribeKvEvents")
        hub = await self.service.loaded.engine.kv_hub()
        resume = request.resume_from if request.HasField("resume_from") else None
        async for batch in kv_relay.batches(hub, resume, request.instance_id):
            for message in messages(batch, hub.instance_id, hub.block_size):
                yield message


def _mode(mode: int) -> int:
    if mode not in control_pb2.PauseMode.values():
        raise fail(Reason.INVALID_REQUEST, f"unknown pause mode {mode}", "mode")
    return mode


def messages(batch: KvBatch, instance_id: str, block_size: int):
    """`batch` as KvEventBatch messages: one, or a snapshot's blocks SNAPSHOT_BLOCKS at a time (each message
    flagged snapshot, the first starting with AllBlocksCleared)."""

    def message(events: list[kv_events_pb2.KvEvent]) -> kv_events_pb2.KvEventBatch:
        return kv_events_pb2.KvEventBatch(
            sequence=batch.sequence,
            timestamp=batch.timestamp,
            instance_id=instance_id,
            block_size=block_size,
            snapshot=batch.snapshot,
            events=events,
        )

    events, blocks = [], 0
    for event in batch.events:
        events.append(to_proto(event))
        blocks += len(event.hashes) if isinstance(event, kv_events.BlocksStored) else 0
        if batch.snapshot and blocks >= SNAPSHOT_BLOCKS:
            yield message(events)
            events, blocks = [], 0
    if events or not batch.snapshot:
        yield message(events)


def to_proto(event: kv_events.KvEvent) -> kv_events_pb2.KvEvent:
    if isinstance(event, kv_events.BlocksStored):
        stored = kv_events_pb2.BlocksStored(
            block_hashes=event.hashes,
            parent_block_hash=event.parent or b"",
            token_ids=event.token_ids,
            cache_salt=event.cache_salt,
            lora_id=event.lora_id,
            lora_name=event.lora_name,
        )
        return kv_events_pb2.KvEvent(blocks_stored=stored)
    if isinstance(event, kv_events.BlocksRemoved):
        return kv_events_pb2.KvEvent(blocks_removed=kv_events_pb2.BlocksRemoved(block_hashes=event.hashes))
    return kv_events_pb2.KvEvent(all_blocks_cleared=kv_events_pb2.AllBlocksCleared())
