"""SGLang's RL control routes (sglang_rl.proto) as a face over EngineControlService, each call applied to every engine
replica (FleetOperations.control_all, as the vLLM face's RL routes); admin-scoped.

Held against SGLang's http_server.py and io_struct.py (the request structs below, field by field) and slime's
client (slime/backends/sglang_utils/sglang_engine.py, update_weight_from_distributed.py). `FIELDS` is the whole
mapping: each route's fields, each with SGLang's default and how it is read; any other field is a 400 naming it.
One SGLang call is several control calls:
- a weight update (disk or distributed) is StartWeightUpdate, UpdateWeights, FinishWeightUpdate(weight_version):
  no step runs meanwhile, in-flight requests recompute under the new weights (docs/rl.md), and the prefix cache is
  emptied with every change, `flush_cache` false too (our consistency rule: no K/V of old weights is read after);
- `/init_weights_update_group` joins SGLang's rendezvous (torch.distributed under `group_name`), replica i as rank
  `rank_offset + i`, so the stack stands for one SGLang server of that many ranks;
- `/pause_generation`: abort is a keep pause, then every in-flight request aborted (SGLang: new requests wait for
  `/continue_generation`, as ours queue); retract and in_place are keep pauses (retract's requests keep their KV);
- `/release_memory_occupation`: all tags (or none) is a level-1 sleep in keep mode; `kv_cache` alone releases the
  KV cache of a keep-paused engine; `/resume_memory_occupation` wakes the tags named, and once nothing is released
  generation goes on (a `/pause_generation` ends too).
Refused: `/update_weights_from_tensor` (its tensors are pickles of a colocated process's CUDA tensors) and
`/get_weights_by_name` (no control operation reads a parameter's values), 501 RPC_NOT_SERVED naming the field.
"""

from __future__ import annotations

from collections.abc import Callable

from google.api import httpbody_pb2

from pipeline_svc.faces.rl_json import body, only, shapes, strings, typed
from pipeline_svc.fleet_service import FleetOperations
from pipeline_svc.shaped_route import json_body
from scaleout.v1 import control_pb2 as C
from scaleout.v1 import sglang_rl_pb2_grpc
from scaleout_common.errors import ServiceError, quote
from scaleout_common.reasons import Reason, fail

TIMEOUT_S = 300.0  # the gateway's unary timeout: an init waits for the trainer to join, an update for its broadcast
GROUP = "weight_update_group"  # SGLang's default group name


def _null(value, field: str):
    if value is not None:
        raise fail(Reason.UNSUPPORTED_FIELD, f"{field} is not supported (null only)", field)


def _exactly(expected):
    """A field taken only at one value (SGLang's default, or what we do anyway)."""

    def read(value, field: str):
        if value != expected or type(value) is not type(expected):
            raise fail(Reason.UNSUPPORTED_FIELD, f"{field} is only taken as {expected!r}", field)
        return value

    return read


def _version(value, field: str) -> str | None:
    return None if value is None else typed(value, str, field)


def _load_format(value, field: str) -> None:
    if value not in (None, "auto", "safetensors"):
        raise fail(Reason.UNSUPPORTED_FIELD, f"{field}: the engines load safetensors only", field)


def _boolean(value, field: str) -> bool:
    return typed(value, bool, field)


def _rids(value, field: str) -> list[str]:
    return [value] if isinstance(value, str) else strings(value, field)


def _tags(value, field: str) -> list[str] | None:
    if value is None:
        return None
    if unknown := [t for t in strings(value, field) if t not in ("weights", "kv_cache")]:
        raise fail(Reason.INVALID_REQUEST, f"tag {quote(unknown[0])} is not weights or kv_cache", field)
    return value


Read = Callable[[object, str], object]
REQUIRED = object()  # a field without a default

# route -> {SGLang's field: (its default, how it is read)}; the face's methods read the values by these names.
FIELDS: dict[str, dict[str, tuple[object, Read]]] = {
    "update_weights_from_disk": {  # UpdateWeightFromDiskReqInput
        "model_path": (REQUIRED, lambda v, f: typed(v, str, f)),
        "load_format": (None, _load_format),
        "abort_all_requests": (False, _boolean),
        "weight_version": (None, _version),
        "is_async": (False, _exactly(False)),
        "torch_empty_cache": (False, _exactly(False)),
        "keep_pause": (False, _exactly(False)),
        "recapture_cuda_graph": (False, _boolean),  # either way: the graphs read the weights in place
        "token_step": (0, _exactly(0)),
        "flush_cache": (True, _boolean),  # the cache is emptied on every weight change (docstring)
        "manifest": (None, _null),
    },
    "init_weights_update_group": {  # InitWeightsUpdateGroupReqInput
        "master_address": (REQUIRED, lambda v, f: typed(v, str, f)),
        "master_port": (REQUIRED, lambda v, f: typed(v, int, f)),
        "rank_offset": (REQUIRED, lambda v, f: typed(v, int, f)),
        "world_size": (REQUIRED, lambda v, f: typed(v, int, f)),
        "group_name": (GROUP, lambda v, f: typed(v, str, f)),
        "backend": ("nccl", lambda v, f: typed(v, str, f)),  # the engines refuse one their device cannot run
    },
    "update_weights_from_distributed": {  # UpdateWeightsFromDistributedReqInput
        "names": (REQUIRED, strings),
        "dtypes": (REQUIRED, strings),
        "shapes": (REQUIRED, shapes),
        "group_name": (GROUP, lambda v, f: typed(v, str, f)),
        "flush_cache": (True, _boolean),  # as for disk
        "abort_all_requests": (False, _boolean),
        "weight_version": (None, _version),
        "load_format": (None, _null),  # SGLang's flattened buckets are not read
        "torch_empty_cache": (False, _exactly(False)),
    },
    "destroy_weights_update_group": {"group_name": (GROUP, lambda v, f: typed(v, str, f))},
    "pause_generation": {"mode": ("abort", lambda v, f: typed(v, str, f))},  # PauseGenerationReqInput
    # ContinueGenerationReqInput: the engine keeps no transient allocations after an update to return either way.
    "continue_generation": {"torch_empty_cache": (True, _boolean)},
    "release_memory_occupation": {"tags": (None, _tags)},
    "resume_memory_occupation": {"tags": (None, _tags)},
    "abort_request": {"rid": ("", _rids), "abort_all": (False, _boolean)},  # AbortReq
}

UPDATE_FIELDS = {"path": "model_path", "dtype_names": "dtypes"}  # UpdateWeightsRequest's names in the engine's errors
PAUSES = {"abort": C.PAUSE_MODE_KEEP, "retract": C.PAUSE_MODE_KEEP, "in_place": C.PAUSE_MODE_KEEP}
TAGS = {"weights": C.SLEEP_TAG_WEIGHTS, "kv_cache": C.SLEEP_TAG_KV_CACHE}
NULL = httpbody_pb2.HttpBody(content_type="application/json", data=b"null")  # a FastAPI handler that returns None
MESSAGES = {  # SGLang's answers (its model runner's and http_server.py's)
    "disk": "Succeeded to update model weights.",
    "distributed": "Succeeded to update parameter online.",
    "init": "Succeeded to initialize custom process group.",
    "destroy": "Succeeded to destroy custom process group.",
    "pause": "Generation paused successfully.",
    "continue": "Generation continued successfully.",
}


def read(route: str, request: httpbody_pb2.HttpBody) -> dict:
    """The route's fields from the body, each read by its row, absent ones at SGLang's default."""
    table, given = FIELDS[route], body(request)
    only(given, table)
    values = {}
    for name, (default, parse) in table.items():
        if name not in given and default is REQUIRED:
            raise fail(Reason.INVALID_REQUEST, f"the body needs {name!r}", name)
        values[name] = parse(given[name], name) if name in given else default
    return values


def _updated(kind: str, version: str | None) -> dict:
    suffix = f" Weight version updated to {version}." if version is not None else ""
    return {"success": True, "message": MESSAGES[kind] + suffix}


class SGLangRl(sglang_rl_pb2_grpc.SGLangRlServiceServicer):
    def __init__(self, fleet: FleetOperations):
        self.fleet = fleet

    async def _all(self, context, method: str, request) -> list:
        return await self.fleet.control_all(context, method, request, TIMEOUT_S)

    async def _update(self, context, update: C.UpdateWeightsRequest | None, version: str | None, abort: bool):
        """One weight update on every replica; a failed one is finished (nothing was written) and reported, naming
        SGLang's fields."""
        if abort:
            await self._all(context, "AbortRequests", C.AbortRequestsRequest())
        await self._all(context, "StartWeightUpdate", C.StartWeightUpdateRequest())
        try:
            if update is not None:
                await self._all(context, "UpdateWeights", update)
        except BaseException as error:
            await self._all(context, "FinishWeightUpdate", C.FinishWeightUpdateRequest())
            if isinstance(error, ServiceError):
                error.violations = [(UPDATE_FIELDS.get(f, f), why) for f, why in error.violations]
            raise
        await self._all(context, "FinishWeightUpdate", C.FinishWeightUpdateRequest(weight_version=version))

    async def _group(self, context, name: str) -> None:
        """Every replica joined the trainer's group under `name` (SGLang fails an update or destroy of another)."""
        infos = await self._all(context, "GetWeightInfo", C.GetWeightInfoRequest())
        if any(i.group_name != name for i in infos):
            raise fail(
                Reason.WEIGHT_TRANSFER_STATE, f"no weight update group {quote(name)} was initialized", "group_name"
            )

    async def UpdateWeightsFromDisk(self, request, context):
        values = read("update_weights_from_disk", request)
        infos = await self._all(context, "GetWeightInfo", C.GetWeightInfoRequest())
        if backends := sorted({i.backend for i in infos} - {"disk"}):
            raise fail(
                Reason.WEIGHT_TRANSFER_UNAVAILABLE,
                f"the engines run weight-transfer backend {backends[0]}: a folder needs --weight-transfer-backend disk",
                "model_path",
            )
        await self._all(context, "InitWeightTransfer", C.InitWeightTransferRequest())
        update = C.UpdateWeightsRequest(path=values["model_path"])
        await self._update(context, update, values["weight_version"], values["abort_all_requests"])
        return json_body(_updated("disk", values["weight_version"]) | {"num_paused_requests": 0})

    async def InitWeightsUpdateGroup(self, request, context):
        values = read("init_weights_update_group", request)
        base = C.InitWeightTransferRequest(
            master_address=values["master_address"],
            master_port=values["master_port"],
            world_size=values["world_size"],
            group_name=values["group_name"],
            group_backend=values["backend"],
        )

        def ranked(position: int) -> C.InitWeightTransferRequest:
            mine = C.InitWeightTransferRequest()
            mine.CopyFrom(base)
            mine.rank = values["rank_offset"] + position
            return mine

        await self._all(context, "InitWeightTransfer", ranked)
        return json_body({"success": True, "message": MESSAGES["init"]})

    async def UpdateWeightsFromDistributed(self, request, context):
        values = read("update_weights_from_distributed", request)
        names, dtypes, dims = values["names"], values["dtypes"], values["shapes"]
        if not len(names) == len(dtypes) == len(dims):
            raise fail(Reason.INVALID_REQUEST, "names, dtypes and shapes differ in length", "names")
        await self._group(context, values["group_name"])
        update = C.UpdateWeightsRequest(names=names, dtypes=dtypes, shapes=[C.TensorShape(dims=s) for s in dims])
        await self._update(context, update if names else None, values["weight_version"], values["abort_all_requests"])
        return json_body(_updated("distributed", values["weight_version"]))

    async def DestroyWeightsUpdateGroup(self, request, context):
        await self._group(context, read("destroy_weights_update_group", request)["group_name"])
        await self._all(context, "ShutdownWeightTransfer", C.ShutdownWeightTransferRequest())
        return json_body({"success": True, "message": MESSAGES["destroy"]})

    async def UpdateWeightsFromTensor(self, request, context):
        raise fail(
            Reason.RPC_NOT_SERVED,
            "/update_weights_from_tensor: serialized_named_tensors are pickles of a colocated process's CUDA tensors, "
            "which the gateway does not take; use /update_weights_from_distributed or /update_weights_from_disk",
            "serialized_named_tensors",
        )

    async def PauseGeneration(self, request, context):
        mode = read("pause_generation", request)["mode"]
        if mode not in PAUSES:
            raise fail(Reason.INVALID_REQUEST, f"mode {quote(mode)} is not abort, retract or in_place", "mode")
        await self._all(context, "Pause", C.PauseRequest(mode=PAUSES[mode]))
        if mode == "abort":
            await self._all(context, "AbortRequests", C.AbortRequestsRequest())
        return json_body({"message": MESSAGES["pause"], "status": "ok"})

    async def ContinueGeneration(self, request, context):
        read("continue_generation", request)
        await self._all(context, "Resume", C.ResumeRequest())
        return json_body({"message": MESSAGES["continue"], "status": "ok"})

    async def ReleaseMemoryOccupation(self, request, context):
        tags = set(read("release_memory_occupation", request)["tags"] or TAGS)
        if tags == {"weights"}:
            raise fail(Reason.UNSUPPORTED_FIELD, "tags: the weights are released with the KV cache", "tags")
        if tags == {"kv_cache"}:
            await self._all(context, "Pause", C.PauseRequest(mode=C.PAUSE_MODE_KEEP))
            await self._all(context, "ReleaseKvCache", C.ReleaseKvCacheRequest())
        else:
            await self._all(context, "Sleep", C.SleepRequest(level=1, mode=C.PAUSE_MODE_KEEP))
        return NULL

    async def ResumeMemoryOccupation(self, request, context):
        tags = read("resume_memory_occupation", request)["tags"] or []
        await self._all(context, "WakeUp", C.WakeUpRequest(tags=[TAGS[t] for t in tags]))
        return NULL

    async def GetWeightVersion(self, request, context):
        infos = await self._all(context, "GetWeightInfo", C.GetWeightInfoRequest())
        return json_body({"weight_version": infos[0].weight_version if infos else None})

    async def AbortRequest(self, request, context):
        values = read("abort_request", request)
        rids = [r for r in values["rid"] if r]
        if values["abort_all"] or rids:  # neither: SGLang aborts nothing
            ids = [] if values["abort_all"] else rids
            await self._all(context, "AbortRequests", C.AbortRequestsRequest(request_ids=ids))
        return httpbody_pb2.HttpBody(content_type="text/plain", data=b"")

    async def GetWeightsByName(self, request, context):
        raise fail(
            Reason.RPC_NOT_SERVED,
            "/get_weights_by_name: no control operation reads a parameter's values (/weight_checker compares digests)",
            "name",
        )
