"""vLLM's RL routes (its serve/dev sleep and cache routers, rl/online/api_router.py) as a face over
EngineControlService, each applied to every engine replica (FleetOperations.control_all); admin-scoped.

Held against vLLM 0.33's routers (entrypoints/rl/online/api_router.py, serve/dev/sleep/api_router.py) and its
weight-transfer engines (distributed/weight_transfer/nccl_engine.py, nccl_common.py): the paths, query parameters
(`mode`, `clear_cache`, `level`, repeated `tags`, `include_dp`), the bodies (`{"init_info": {...}}`,
`{"update_info": {...}}` or one per replica, `{"weight_version"}`, `{"new_version"}`, `{"request_ids"}`,
`{"action", "baseline"}`) and the answers. The tables below are the whole mapping. What differs:
- nccl: on CUDA engines vLLM's own rendezvous (its store's ncclUniqueId, or `nccl_unique_id_b64`), on CPU
  engines torch.distributed's gloo (docs/rl.md); anything we do not honour is refused (400 naming it);
  `packed_num_buffers` (how many CUDA streams vLLM overlaps) is checked and not
  forwarded: the bytes and the buffers' boundaries do not depend on it;
- `update_info.path` (ours): the disk backend's safetensors folder;
- replica i of the fleet takes rank `rank_offset + i` (vLLM's data-parallel ranks), and `/get_world_size` counts
  every replica (include_dp) or one;
- `/weight_checker` digests are keyed `dp<i>:pp0:pcp0:tp0:<checkpoint name>` (vLLM: its module's parameter names);
- `/start_draft_weight_update` (no draft model here) and `/collective_rpc` (no engine method is callable by name)
  are refused, 501 RPC_NOT_SERVED.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from pipeline_svc.faces.rl_json import body as _body
from pipeline_svc.faces.rl_json import only as _only
from pipeline_svc.faces.rl_json import shapes
from pipeline_svc.faces.rl_json import strings as _strings
from pipeline_svc.faces.rl_json import typed as _typed
from pipeline_svc.fleet_service import FleetOperations
from pipeline_svc.shaped_route import json_body
from scaleout.v1 import control_pb2 as C
from scaleout_common.errors import quote
from scaleout_common.reasons import Reason, fail

TIMEOUT_S = 300.0  # the gateway's unary timeout: an init waits for the trainer to join, an update for its broadcast

PAUSE_MODES: dict[str, C.PauseMode] = {
    "": C.PAUSE_MODE_ABORT,
    "abort": C.PAUSE_MODE_ABORT,
    "wait": C.PAUSE_MODE_WAIT,
    "keep": C.PAUSE_MODE_KEEP,
}
SLEEP_TAGS: dict[str, C.SleepTag] = {
    "weights": C.SLEEP_TAG_WEIGHTS,
    "kv_cache": C.SLEEP_TAG_KV_CACHE,
    "scheduling": C.SLEEP_TAG_SCHEDULING,
}

# `init_info` key -> what it sets on InitWeightTransferRequest (vLLM's NCCLWeightTransferInitInfo, as its trainer's
# build_worker_init_payload sends it).
INIT_INFO: dict[str, Callable[[C.InitWeightTransferRequest, object], object]] = {
    "master_address": lambda r, v: setattr(r, "master_address", _typed(v, str, "init_info.master_address")),
    "master_port": lambda r, v: setattr(r, "master_port", _typed(v, int, "init_info.master_port")),
    "rank_offset": lambda r, v: setattr(r, "rank", _typed(v, int, "init_info.rank_offset")),  # + the replica's position
    "world_size": lambda r, v: setattr(r, "world_size", _typed(v, int, "init_info.world_size")),
    "packed": lambda r, v: setattr(r, "packed", _typed(v, bool, "init_info.packed")),
    "packed_buffer_size_bytes": lambda r, v: setattr(
        r, "packed_buffer_size_bytes", _positive(v, "init_info.packed_buffer_size_bytes")
    ),
    "packed_num_buffers": lambda r, v: _positive(v, "init_info.packed_num_buffers"),  # checked only (docstring)
    "nccl_unique_id_b64": lambda r, v: setattr(r, "nccl_unique_id", _b64(v, "init_info.nccl_unique_id_b64")),
}

# `update_info` key -> what it sets on UpdateWeightsRequest (vLLM's NCCL and IPC update infos; `path` is ours).
UPDATE_INFO: dict[str, Callable[[C.UpdateWeightsRequest, object], None]] = {
    "names": lambda r, v: r.names.extend(_strings(v, "update_info.names")),
    "dtype_names": lambda r, v: r.dtypes.extend(_strings(v, "update_info.dtype_names")),
    "shapes": lambda r, v: r.shapes.extend(C.TensorShape(dims=s) for s in shapes(v, "update_info.shapes")),
    "path": lambda r, v: setattr(r, "path", _typed(v, str, "update_info.path")),
    "ipc_handles_pickled": lambda r, v: setattr(r, "ipc_handles_pickled", _b64(v, "update_info.ipc_handles_pickled")),
    "tensor_sizes": lambda r, v: r.tensor_sizes.extend(_sizes(v)),
    "is_checkpoint_format": lambda r, v: _checkpoint_format(v, "update_info.is_checkpoint_format"),  # vLLM < 0.33
}

MESSAGES = {  # vLLM's answers to the weight-transfer phases
    "init": {"message": "Weight transfer initialized"},
    "start": {"message": "Weight update started"},
    "update": {"message": "Weights updated"},
    "finish": {"message": "Weight update finished"},
    "shutdown": {"message": "Weight transfer shut down"},
}

CHECKSUM_KEY = "dp{replica}:pp0:pcp0:tp0:{name}"  # vLLM's worker prefix (Worker._weight_checksum_prefix)


def _positive(value, field: str) -> int:
    if _typed(value, int, field) <= 0:
        raise fail(Reason.INVALID_REQUEST, f"{field} must be positive", field)
    return value


def _b64(value, field: str) -> bytes:
    """Standard base64 (RFC 4648, not URL-safe), as vLLM decodes it."""
    try:
        return base64.b64decode(_typed(value, str, field), validate=True)
    except binascii.Error:
        raise fail(Reason.INVALID_REQUEST, f"{field} is not standard base64", field) from None


def _sizes(value) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise fail(
            Reason.INVALID_REQUEST, "update_info.tensor_sizes must be a list of byte counts", "update_info.tensor_sizes"
        )
    return value


def _checkpoint_format(value, field: str) -> None:
    if not _typed(value, bool, field):
        raise fail(Reason.UNSUPPORTED_FIELD, f"{field}: only checkpoint-format weights are loaded", field)


def _object(body: dict, key: str) -> dict:
    value = body.get(key)
    if not isinstance(value, dict):
        raise fail(Reason.INVALID_REQUEST, f"the body needs {key!r}: an object", key)
    return value


def _apply(table: dict, message, info: dict, where: str):
    _only(info, set(table), where)
    for key, value in info.items():
        table[key](message, value)
    return message


def _mode(name: str) -> C.PauseMode:
    if name not in PAUSE_MODES:
        raise fail(Reason.INVALID_REQUEST, f"mode {quote(name)} is not abort, wait or keep", "mode")
    return PAUSE_MODES[name]


class VllmRl:
    """The RL routes of VllmServerService (mixed into the face's servicer, pipeline_svc/faces/vllm_server.py)."""

    fleet: FleetOperations

    async def _all(self, context, method: str, request) -> list:
        return await self.fleet.control_all(context, method, request, TIMEOUT_S)

    async def Pause(self, request, context):
        mode = _mode(request.mode)
        await self._all(context, "Pause", C.PauseRequest(mode=mode))
        clear = request.clear_cache if request.HasField("clear_cache") else True
        if clear and mode != C.PAUSE_MODE_KEEP:  # vLLM's deprecated flag: the caches go after abort or wait
            await self.fleet.reset_all(context)
        return json_body({"status": "paused"})

    async def Resume(self, request, context):
        await self._all(context, "Resume", C.ResumeRequest())
        return json_body({"status": "resumed"})

    async def IsPaused(self, request, context):
        states = await self._all(context, "GetPauseState", C.GetPauseStateRequest())
        return json_body({"is_paused": any(s.paused for s in states)})

    async def Sleep(self, request, context):
        level = request.level if request.HasField("level") else 1
        await self._all(context, "Sleep", C.SleepRequest(level=level, mode=_mode(request.mode)))
        return json_body({"status": "sleeping", "level": level})

    async def WakeUp(self, request, context):
        if unknown := [t for t in request.tags if t not in SLEEP_TAGS]:
            raise fail(
                Reason.INVALID_REQUEST, f"tag {quote(unknown[0])} is not weights, kv_cache or scheduling", "tags"
            )
        tags = list(request.tags) or None
        answers = await self._all(context, "WakeUp", C.WakeUpRequest(tags=[SLEEP_TAGS[t] for t in tags or []]))
        return json_body({"status": "awake" if all(a.awake for a in answers) else "sleeping", "tags": tags})

    async def IsSleeping(self, request, context):  # vLLM's: paused counts as sleeping (EngineCore.is_sleeping)
        states = await self._all(context, "GetSleepState", C.GetSleepStateRequest())
        pauses = await self._all(context, "GetPauseState", C.GetPauseStateRequest())
        return json_body({"is_sleeping": any(s.sleeping or s.asleep for s in states) or any(p.paused for p in pauses)})

    async def ReleaseKvCacheMemory(self, request, context):
        await self._all(context, "ReleaseKvCache", C.ReleaseKvCacheRequest())
        return json_body({"status": "kv_cache_released"})

    async def AbortRequests(self, request, context):
        body = _body(request)
        _only(body, {"request_ids"})
        ids = _strings(body.get("request_ids") or [], "request_ids")
        answers = await self._all(context, "AbortRequests", C.AbortRequestsRequest(request_ids=ids))
        return json_body({"status": "aborted", "aborted": len(ids) if ids else sum(a.aborted for a in answers)})

    async def InitWeightTransferEngine(self, request, context):
        body = _body(request)
        _only(body, {"init_info"})
        base = _apply(INIT_INFO, C.InitWeightTransferRequest(), _object(body, "init_info"), "init_info")

        def ranked(position: int) -> C.InitWeightTransferRequest:
            mine = C.InitWeightTransferRequest()
            mine.CopyFrom(base)
            if base.world_size:
                mine.rank = base.rank + position
            return mine

        await self._all(context, "InitWeightTransfer", ranked)
        return json_body(MESSAGES["init"])

    async def StartWeightUpdate(self, request, context):
        body = _body(request)
        _only(body, {"is_checkpoint_format"})
        if "is_checkpoint_format" in body:
            _checkpoint_format(body["is_checkpoint_format"], "is_checkpoint_format")
        await self._all(context, "StartWeightUpdate", C.StartWeightUpdateRequest())
        return json_body(MESSAGES["start"])

    async def UpdateWeights(self, request, context):
        body = _body(request)
        _only(body, {"update_info"})
        infos = body.get("update_info")
        if isinstance(infos, list):  # one per replica (vLLM's per-rank list; a replica is one rank)
            replicas = len(await self._all(context, "GetWeightInfo", C.GetWeightInfoRequest()))
            if len(infos) != replicas or not all(isinstance(i, dict) for i in infos):
                raise fail(
                    Reason.INVALID_REQUEST, f"update_info needs one object per replica ({replicas})", "update_info"
                )
            updates = [_apply(UPDATE_INFO, C.UpdateWeightsRequest(), i, "update_info") for i in infos]
            await self._all(context, "UpdateWeights", lambda position: updates[position])
        else:
            update = _apply(UPDATE_INFO, C.UpdateWeightsRequest(), _object(body, "update_info"), "update_info")
            await self._all(context, "UpdateWeights", update)
        return json_body(MESSAGES["update"])

    async def ShutdownWeightTransferEngine(self, request, context):
        await self._all(context, "ShutdownWeightTransfer", C.ShutdownWeightTransferRequest())
        return json_body(MESSAGES["shutdown"])

    async def StartDraftWeightUpdate(self, request, context):
        raise fail(Reason.RPC_NOT_SERVED, "/start_draft_weight_update: the engines run no speculative draft model")

    async def CollectiveRpc(self, request, context):
        raise fail(Reason.RPC_NOT_SERVED, "/collective_rpc: no engine method is callable by name")

    async def FinishWeightUpdate(self, request, context):
        body = _body(request)
        _only(body, {"weight_version"})
        finish = C.FinishWeightUpdateRequest()
        if body.get("weight_version") is not None:
            finish.weight_version = _typed(body["weight_version"], str, "weight_version")
        await self._all(context, "FinishWeightUpdate", finish)
        return json_body(MESSAGES["finish"])

    async def UpdateWeightVersion(self, request, context):
        """vLLM's and SGLang's route alike (SGLang's UpdateWeightVersionReqInput; its `message` in the answer). SGLang
        defaults `abort_all_requests` to true, vLLM aborts nothing: only an explicit true aborts."""
        body = _body(request)
        _only(body, {"new_version", "abort_all_requests"})
        version = _typed(body.get("new_version"), str, "new_version")
        if _typed(body.get("abort_all_requests", False), bool, "abort_all_requests"):
            await self._all(context, "AbortRequests", C.AbortRequestsRequest())
        await self._all(context, "SetWeightVersion", C.SetWeightVersionRequest(weight_version=version))
        return json_body({"success": True, "message": f"Weight version updated to {version}", "new_version": version})

    async def WeightInfo(self, request, context):
        infos = await self._all(context, "GetWeightInfo", C.GetWeightInfoRequest())
        return json_body({"weight_version": infos[0].weight_version if infos else None})

    async def GetWorldSize(self, request, context):
        infos = await self._all(context, "GetWeightInfo", C.GetWeightInfoRequest())
        include_dp = request.include_dp if request.HasField("include_dp") else True
        sizes = [i.world_size for i in infos]
        return json_body({"world_size": sum(sizes) if include_dp else max(sizes, default=0)})

    async def WeightChecker(self, request, context):
        body = _body(request)
        _only(body, {"action", "baseline"})
        action, baseline = body.get("action"), body.get("baseline")
        if action not in ("checksum", "reset", "compare"):
            raise fail(Reason.INVALID_REQUEST, "action must be checksum, reset or compare", "action")
        if (baseline is not None) != (action == "compare"):
            raise fail(Reason.INVALID_REQUEST, "a baseline goes with action 'compare', and only with it", "baseline")
        if action == "reset":
            await self._all(context, "ZeroWeights", C.ZeroWeightsRequest())
            return json_body({"status": "reset"})
        if baseline is not None and not (
            isinstance(baseline, dict) and all(isinstance(v, str) for v in baseline.values())
        ):
            raise fail(Reason.INVALID_REQUEST, "baseline must map names to strings", "baseline")
        answers = await self._all(context, "GetWeightChecksums", C.GetWeightChecksumsRequest())
        checksums = {
            CHECKSUM_KEY.format(replica=position, name=name): digest
            for position, answer in enumerate(answers)
            for name, digest in sorted(answer.checksums.items())
        }
        if action == "checksum":
            return json_body({"checksums": checksums})
        assert isinstance(baseline, dict)  # action is "compare": checked above
        mismatches = sorted(k for k in checksums.keys() | baseline.keys() if checksums.get(k) != baseline.get(k))
        return json_body({"match": not mismatches, "mismatches": mismatches})
