"""vLLM's RL routes (its serve/dev sleep and cache routers, rl/online/api_router.py) as a face over
EngineControlService, each applied to every engine replica (FleetOperations.control_all); admin-scoped.

Held against vLLM 0.33's routers and its rlhf_http_* examples: the paths, query parameters (`mode`, `clear_cache`,
`level`, repeated `tags`, `include_dp`), the bodies (`{"init_info": {...}}`, `{"update_info": {...}}`,
`{"weight_version"}`, `{"new_version"}`) and the answers. The tables below are the whole mapping. What differs:
- nccl rendezvous is torch.distributed's (docs/rl.md): vLLM's `packed` broadcast and `nccl_unique_id_b64` are
  refused (400 naming them), as is anything else we do not honour;
- `update_info.path` (ours): the disk backend's safetensors folder;
- replica i of the fleet takes rank `rank_offset + i` (vLLM's data-parallel ranks), and `/get_world_size` counts
  every replica (include_dp) or one.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from google.api import httpbody_pb2

from pipeline_svc.fleet_service import FleetOperations
from pipeline_svc.shaped_route import json_body
from scaleout.v1 import control_pb2 as C
from scaleout_common.errors import quote
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

TIMEOUT_S = 300.0  # the gateway's unary timeout: an init waits for the trainer to join, an update for its broadcast

PAUSE_MODES: dict[str, C.PauseMode] = {
    "": C.PAUSE_MODE_ABORT,
    "abort": C.PAUSE_MODE_ABORT,
    "wait": C.PAUSE_MODE_WAIT,
    "keep": C.PAUSE_MODE_KEEP,
}
SLEEP_TAGS: dict[str, C.SleepTag] = {"weights": C.SLEEP_TAG_WEIGHTS, "kv_cache": C.SLEEP_TAG_KV_CACHE}

# `init_info` key -> what it sets on InitWeightTransferRequest; False: refused unless false/absent (packed).
INIT_INFO: dict[str, Callable[[C.InitWeightTransferRequest, object], None]] = {
    "master_address": lambda r, v: setattr(r, "master_address", _typed(v, str, "init_info.master_address")),
    "master_port": lambda r, v: setattr(r, "master_port", _typed(v, int, "init_info.master_port")),
    "rank_offset": lambda r, v: setattr(r, "rank", _typed(v, int, "init_info.rank_offset")),  # + the replica's position
    "world_size": lambda r, v: setattr(r, "world_size", _typed(v, int, "init_info.world_size")),
    "packed": lambda r, v: _unpacked(v, "init_info.packed"),
}

# `update_info` key -> what it sets on UpdateWeightsRequest.
UPDATE_INFO: dict[str, Callable[[C.UpdateWeightsRequest, object], None]] = {
    "names": lambda r, v: r.names.extend(_strings(v, "update_info.names")),
    "dtype_names": lambda r, v: r.dtypes.extend(_strings(v, "update_info.dtype_names")),
    "shapes": lambda r, v: r.shapes.extend(C.TensorShape(dims=s) for s in _shapes(v)),
    "path": lambda r, v: setattr(r, "path", _typed(v, str, "update_info.path")),
    "ipc_handles_pickled": lambda r, v: setattr(r, "ipc_handles_pickled", _b64(v)),
    "packed": lambda r, v: _unpacked(v, "update_info.packed"),
    "is_checkpoint_format": lambda r, v: _checkpoint_format(v, "update_info.is_checkpoint_format"),
}

MESSAGES = {  # vLLM's answers to the weight-transfer phases
    "init": {"message": "Weight transfer initialized"},
    "start": {"message": "Weight update started"},
    "update": {"message": "Weights updated"},
    "finish": {"message": "Weight update finished"},
}


def _typed(value, kind: type, field: str):
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise fail(Reason.INVALID_REQUEST, f"{field} must be a {kind.__name__}", field)
    return value


def _strings(value, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(Reason.INVALID_REQUEST, f"{field} must be a list of strings", field)
    return value


def _shapes(value) -> list[list[int]]:
    if not isinstance(value, list) or not all(
        isinstance(s, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in s) for s in value
    ):
        raise fail(
            Reason.INVALID_REQUEST, "update_info.shapes must be a list of lists of integers", "update_info.shapes"
        )
    return value


def _b64(value) -> bytes:
    try:
        return base64.b64decode(_typed(value, str, "update_info.ipc_handles_pickled"), validate=True)
    except binascii.Error:
        raise fail(Reason.INVALID_REQUEST, "update_info.ipc_handles_pickled is not base64", "update_info") from None


def _unpacked(value, field: str) -> None:
    if _typed(value, bool, field):
        raise fail(
            Reason.UNSUPPORTED_FIELD, f"{field}: packed broadcasts are not supported (send packed: false)", field
        )


def _checkpoint_format(value, field: str) -> None:
    if not _typed(value, bool, field):
        raise fail(Reason.UNSUPPORTED_FIELD, f"{field}: only checkpoint-format weights are loaded", field)


def _object(body: dict, key: str, required: bool) -> dict:
    value = body.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise fail(Reason.INVALID_REQUEST, f"the body needs {key!r}: an object", key)
    return value


def _only(body: dict, keys: set[str], where: str = "") -> None:
    if unknown := sorted(set(body) - keys):
        name = f"{where}.{unknown[0]}" if where else unknown[0]
        raise fail(Reason.UNSUPPORTED_FIELD, f"{quote(name)} is not supported", name)


def _apply(table: dict, message, info: dict, where: str):
    _only(info, set(table), where)
    for key, value in info.items():
        table[key](message, value)
    return message


def _mode(name: str) -> C.PauseMode:
    if name not in PAUSE_MODES:
        raise fail(Reason.INVALID_REQUEST, f"mode {quote(name)} is not abort, wait or keep", "mode")
    return PAUSE_MODES[name]


def _body(request: httpbody_pb2.HttpBody) -> dict:
    return load_object(request.data)


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
            raise fail(Reason.INVALID_REQUEST, f"tag {quote(unknown[0])} is not weights or kv_cache", "tags")
        tags = list(request.tags) or None
        answers = await self._all(context, "WakeUp", C.WakeUpRequest(tags=[SLEEP_TAGS[t] for t in tags or []]))
        return json_body({"status": "awake" if all(a.awake for a in answers) else "sleeping", "tags": tags})

    async def IsSleeping(self, request, context):
        states = await self._all(context, "GetSleepState", C.GetSleepStateRequest())
        return json_body({"is_sleeping": any(s.sleeping for s in states)})

    async def InitWeightTransferEngine(self, request, context):
        body = _body(request)
        _only(body, {"init_info"})
        base = _apply(INIT_INFO, C.InitWeightTransferRequest(), _object(body, "init_info", True), "init_info")

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
        update = _apply(UPDATE_INFO, C.UpdateWeightsRequest(), _object(body, "update_info", True), "update_info")
        await self._all(context, "UpdateWeights", update)
        return json_body(MESSAGES["update"])

    async def FinishWeightUpdate(self, request, context):
        body = _body(request)
        _only(body, {"weight_version"})
        finish = C.FinishWeightUpdateRequest()
        if body.get("weight_version") is not None:
            finish.weight_version = _typed(body["weight_version"], str, "weight_version")
        await self._all(context, "FinishWeightUpdate", finish)
        return json_body(MESSAGES["finish"])

    async def UpdateWeightVersion(self, request, context):
        body = _body(request)
        _only(body, {"new_version"})
        version = _typed(body.get("new_version"), str, "new_version")
        await self._all(context, "SetWeightVersion", C.SetWeightVersionRequest(weight_version=version))
        return json_body({"success": True, "new_version": version})

    async def WeightInfo(self, request, context):
        infos = await self._all(context, "GetWeightInfo", C.GetWeightInfoRequest())
        return json_body({"weight_version": infos[0].weight_version if infos else None})

    async def GetWorldSize(self, request, context):
        infos = await self._all(context, "GetWeightInfo", C.GetWeightInfoRequest())
        include_dp = request.include_dp if request.HasField("include_dp") else True
        sizes = [i.world_size for i in infos]
        return json_body({"world_size": sum(sizes) if include_dp else max(sizes, default=0)})
