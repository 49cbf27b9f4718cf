"""SGLang's RL routes' mapping onto EngineControlService, row by row (pipeline_svc/faces/sglang_rl.py), over a fleet
of two replicas that answers from canned messages: the calls in order, what each replica gets, SGLang's answers and
the refusals naming their fields. The real stack runs them in tests/gateway/test_sglang_rl_routes.py."""

from __future__ import annotations

import json

import pytest
from google.api import httpbody_pb2

from pipeline_svc.faces.sglang_rl import SGLangRl
from scaleout.v1 import control_pb2 as C
from scaleout.v1 import sglang_rl_pb2 as S
from scaleout_common.errors import ServiceError


class Fleet:
    """Two replicas on the disk or nccl backend, joined to `group`: records (method, each replica's request)."""

    def __init__(self, backend: str = "nccl", group: str = "weight_update_group"):
        self.calls: list[tuple[str, list]] = []
        self.info = C.GetWeightInfoResponse(weight_version="v7", backend=backend, world_size=1, group_name=group)

    async def control_all(self, context, method, request, timeout_s):
        self.calls.append((method, [request(i) if callable(request) else request for i in range(2)]))
        return [self.info] * 2 if method == "GetWeightInfo" else [None, None]

    def methods(self) -> list[str]:
        return [m for m, _ in self.calls]


def face(fleet: Fleet) -> SGLangRl:
    return SGLangRl(fleet)  # type: ignore[arg-type]


def body(payload) -> httpbody_pb2.HttpBody:
    return httpbody_pb2.HttpBody(content_type="application/json", data=json.dumps(payload).encode())


def answer(http: httpbody_pb2.HttpBody):
    return json.loads(http.data) if http.data else None


async def refused(call, field: str) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        await call
    assert caught.value.violations[0][0] == field, caught.value
    return caught.value


async def test_init_gives_each_replica_its_rank_and_the_group():
    fleet = Fleet()
    init = {"master_address": "10.0.0.1", "master_port": 29500, "rank_offset": 1, "world_size": 3}
    init |= {"group_name": "slime-pp_0", "backend": "nccl"}  # what slime sends
    assert answer(await face(fleet).InitWeightsUpdateGroup(body(init), None)) == {
        "success": True,
        "message": "Succeeded to initialize custom process group.",
    }
    [(method, sent)] = fleet.calls
    assert method == "InitWeightTransfer" and [r.rank for r in sent] == [1, 2]
    assert sent[0].group_name == "slime-pp_0" and sent[0].group_backend == "nccl" and sent[0].world_size == 3
    await refused(face(fleet).InitWeightsUpdateGroup(body({"master_address": "h"}), None), "master_port")
    await refused(face(fleet).InitWeightsUpdateGroup(body(init | {"master_port": "1"}), None), "master_port")


async def test_a_distributed_update_is_one_update_under_the_group():
    fleet = Fleet(group="g")
    update = {"names": ["w"], "dtypes": ["bfloat16"], "shapes": [[2, 3]], "group_name": "g", "flush_cache": False}
    update |= {"weight_version": "3", "abort_all_requests": True}
    assert answer(await face(fleet).UpdateWeightsFromDistributed(body(update), None)) == {
        "success": True,
        "message": "Succeeded to update parameter online. Weight version updated to 3.",
    }
    assert fleet.methods() == [
        "GetWeightInfo",
        "AbortRequests",
        "StartWeightUpdate",
        "UpdateWeights",
        "FinishWeightUpdate",
    ]
    sent = dict(fleet.calls)
    assert list(sent["UpdateWeights"][0].names) == ["w"] and list(sent["UpdateWeights"][0].shapes[0].dims) == [2, 3]
    assert sent["FinishWeightUpdate"][0].weight_version == "3"
    await refused(face(fleet).UpdateWeightsFromDistributed(body(update | {"group_name": "h"}), None), "group_name")
    await refused(face(fleet).UpdateWeightsFromDistributed(body(update | {"dtypes": []}), None), "names")
    await refused(face(fleet).UpdateWeightsFromDistributed(body(update | {"load_format": "x"}), None), "load_format")
    fleet.calls.clear()
    await face(fleet).UpdateWeightsFromDistributed(
        body({"names": [], "dtypes": [], "shapes": [], "group_name": "g"}), None
    )
    assert "UpdateWeights" not in fleet.methods()  # nothing named: nothing broadcast (ours would resend the last)
    assert answer(await face(fleet).DestroyWeightsUpdateGroup(body({"group_name": "g"}), None)) == {
        "success": True,
        "message": "Succeeded to destroy custom process group.",
    }
    await refused(face(fleet).DestroyWeightsUpdateGroup(body({}), None), "group_name")  # SGLang's default name


async def test_a_disk_update_needs_the_disk_backend():
    fleet = Fleet(backend="disk")
    answered = answer(await face(fleet).UpdateWeightsFromDisk(body({"model_path": "/m", "load_format": "auto"}), None))
    assert answered == {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}
    assert fleet.methods() == [
        "GetWeightInfo",
        "InitWeightTransfer",
        "StartWeightUpdate",
        "UpdateWeights",
        "FinishWeightUpdate",
    ]
    assert dict(fleet.calls)["UpdateWeights"][0].path == "/m"
    assert not dict(fleet.calls)["FinishWeightUpdate"][0].HasField("weight_version")
    for field, value in (("is_async", True), ("keep_pause", True), ("token_step", 1), ("manifest", {}), ("rid", "x")):
        await refused(face(fleet).UpdateWeightsFromDisk(body({"model_path": "/m", field: value}), None), field)
    error = await refused(face(Fleet()).UpdateWeightsFromDisk(body({"model_path": "/m"}), None), "model_path")
    assert error.reason == "WEIGHT_TRANSFER_UNAVAILABLE"


@pytest.mark.parametrize(
    ("mode", "methods"),
    [
        ("abort", ["Pause", "AbortRequests"]),
        ("retract", ["Pause"]),
        ("in_place", ["Pause"]),
        (None, ["Pause", "AbortRequests"]),
    ],
)
async def test_pause_modes(mode, methods):
    fleet = Fleet()
    given = {} if mode is None else {"mode": mode}
    assert answer(await face(fleet).PauseGeneration(body(given), None)) == {
        "message": "Generation paused successfully.",
        "status": "ok",
    }
    assert fleet.methods() == methods and fleet.calls[0][1][0].mode == C.PAUSE_MODE_KEEP
    assert fleet.calls[-1][1][0] == (
        C.AbortRequestsRequest() if mode in ("abort", None) else C.PauseRequest(mode=C.PAUSE_MODE_KEEP)
    )


async def test_memory_tags_and_aborts():
    fleet = Fleet()
    assert answer(await face(fleet).ReleaseMemoryOccupation(body({}), None)) is None
    assert await face(fleet).ReleaseMemoryOccupation(body({}), None) == httpbody_pb2.HttpBody(
        content_type="application/json", data=b"null"
    )
    await face(fleet).ReleaseMemoryOccupation(body({"tags": ["kv_cache"]}), None)
    await face(fleet).ResumeMemoryOccupation(body({"tags": ["weights"]}), None)
    assert fleet.methods() == ["Sleep", "Sleep", "Pause", "ReleaseKvCache", "WakeUp"]
    assert fleet.calls[0][1][0] == C.SleepRequest(level=1, mode=C.PAUSE_MODE_KEEP)
    assert list(fleet.calls[-1][1][0].tags) == [C.SLEEP_TAG_WEIGHTS]
    await refused(face(fleet).ReleaseMemoryOccupation(body({"tags": ["weights"]}), None), "tags")
    await refused(face(fleet).ResumeMemoryOccupation(body({"tags": ["cuda_graph"]}), None), "tags")
    fleet.calls.clear()
    assert (await face(fleet).AbortRequest(body({"rid": "r1"}), None)).data == b""
    await face(fleet).AbortRequest(body({"rid": ["a", "b"]}), None)
    await face(fleet).AbortRequest(body({"abort_all": True}), None)
    await face(fleet).AbortRequest(body({}), None)  # SGLang's: nothing
    assert [list(sent[0].request_ids) for _, sent in fleet.calls] == [["r1"], ["a", "b"], []]
    assert answer(await face(fleet).GetWeightVersion(S.SGLangGetWeightVersionRequest(), None)) == {
        "weight_version": "v7"
    }


async def test_the_routes_refused():
    for call, field in (
        (
            face(Fleet()).UpdateWeightsFromTensor(body({"serialized_named_tensors": []}), None),
            "serialized_named_tensors",
        ),
        (face(Fleet()).GetWeightsByName(body({"name": "w"}), None), "name"),
    ):
        assert (await refused(call, field)).reason == "RPC_NOT_SERVED"
    await refused(face(Fleet()).PauseGeneration(body({"mode": "later"}), None), "mode")
    await refused(face(Fleet()).ContinueGeneration(body({"torch_empty_cache": 1}), None), "torch_empty_cache")
