"""vLLM's RL routes' mapping onto EngineControlService, row by row (pipeline_svc/faces/vllm_rl.py), over a fleet of
two replicas that answers from canned messages: the requests each replica gets, vLLM's answers, the refusals."""

from __future__ import annotations

import json

import pytest
from google.api import httpbody_pb2

from pipeline_svc.faces.vllm_server import VllmServer
from scaleout.v1 import control_pb2 as C
from scaleout.v1 import vllm_server_pb2 as V
from scaleout_common.errors import ServiceError

ANSWERS = {
    "GetPauseState": [C.GetPauseStateResponse(), C.GetPauseStateResponse(paused=True, mode=C.PAUSE_MODE_KEEP)],
    "WakeUp": [C.WakeUpResponse(awake=True), C.WakeUpResponse(awake=False)],
    "GetWeightInfo": [C.GetWeightInfoResponse(weight_version="v7", world_size=1)] * 2,
    "GetSleepState": [C.GetSleepStateResponse(), C.GetSleepStateResponse(asleep=[C.SLEEP_TAG_KV_CACHE])],
    "AbortRequests": [C.AbortRequestsResponse(aborted=2), C.AbortRequestsResponse(aborted=1)],
    "GetWeightChecksums": [C.GetWeightChecksumsResponse(checksums={"w": "a"})] * 2,
}


class Fleet:
    """Two replicas: records each one's request per method."""

    def __init__(self):
        self.sent: dict[str, list] = {}
        self.resets = 0

    async def control_all(self, context, method, request, timeout_s):
        self.sent[method] = [request(i) if callable(request) else request for i in range(2)]
        return ANSWERS.get(method, [None, None])

    async def reset_all(self, context):
        self.resets += 1


def body(payload) -> httpbody_pb2.HttpBody:
    return httpbody_pb2.HttpBody(content_type="application/json", data=json.dumps(payload).encode())


def answer(http: httpbody_pb2.HttpBody):
    return json.loads(http.data)


@pytest.fixture
def face():
    fleet = Fleet()
    return VllmServer(fleet, None, None), fleet  # type: ignore[arg-type]


async def test_init_info_maps_rank_offset_to_each_replicas_rank(face):
    server, fleet = face
    # What vLLM's NCCLTrainerWeightTransferEngine sends (nccl_common.build_worker_init_payload).
    init = {"master_address": "10.0.0.1", "master_port": 29500, "rank_offset": 1, "world_size": 3, "packed": True}
    init |= {"packed_buffer_size_bytes": 1 << 30, "packed_num_buffers": 2}
    assert answer(await server.InitWeightTransferEngine(body({"init_info": init}), None)) == {
        "message": "Weight transfer initialized"
    }
    sent = fleet.sent["InitWeightTransfer"]
    assert [(r.master_address, r.master_port, r.rank, r.world_size) for r in sent] == [
        ("10.0.0.1", 29500, 1, 3),
        ("10.0.0.1", 29500, 2, 3),
    ]
    assert sent[1].packed and sent[1].packed_buffer_size_bytes == 1 << 30


async def test_update_info_and_the_phases_answers(face):
    server, fleet = face
    info = {"names": ["a", "b"], "dtype_names": ["bfloat16", "float32"], "shapes": [[2, 3], [4]]}
    assert answer(await server.UpdateWeights(body({"update_info": info}), None)) == {"message": "Weights updated"}
    sent = fleet.sent["UpdateWeights"][0]
    assert (list(sent.names), list(sent.dtypes), [list(s.dims) for s in sent.shapes]) == (
        ["a", "b"],
        ["bfloat16", "float32"],
        [[2, 3], [4]],
    )
    await server.UpdateWeights(body({"update_info": {"path": "/w"}}), None)
    assert fleet.sent["UpdateWeights"][0].path == "/w"
    assert answer(await server.StartWeightUpdate(body({"is_checkpoint_format": True}), None)) == {
        "message": "Weight update started"
    }
    assert answer(await server.FinishWeightUpdate(body({"weight_version": "s1"}), None)) == {
        "message": "Weight update finished"
    }
    assert fleet.sent["FinishWeightUpdate"][0].weight_version == "s1"
    await server.FinishWeightUpdate(body({}), None)
    assert not fleet.sent["FinishWeightUpdate"][0].HasField("weight_version")
    assert answer(await server.UpdateWeightVersion(body({"new_version": "s2"}), None)) == {
        "success": True,
        "message": "Weight version updated to s2",  # SGLang's, on the same path
        "new_version": "s2",
    }
    await server.UpdateWeights(body({"update_info": [{"names": ["a"]}, {"names": ["b"]}]}), None)  # one per replica
    assert [list(r.names) for r in fleet.sent["UpdateWeights"]] == [["a"], ["b"]]
    assert answer(await server.ShutdownWeightTransferEngine(V.VllmShutdownWeightTransferEngineRequest(), None)) == {
        "message": "Weight transfer shut down"
    }
    assert answer(await server.WeightInfo(V.VllmWeightInfoRequest(), None)) == {"weight_version": "v7"}
    assert answer(await server.GetWorldSize(V.VllmGetWorldSizeRequest(), None)) == {"world_size": 2}
    assert answer(await server.GetWorldSize(V.VllmGetWorldSizeRequest(include_dp=False), None)) == {"world_size": 1}


async def test_pause_sleep_and_wake_answers(face):
    server, fleet = face
    assert answer(await server.Pause(V.VllmPauseRequest(mode="wait"), None)) == {"status": "paused"}
    assert fleet.sent["Pause"][0].mode == C.PAUSE_MODE_WAIT and fleet.resets == 1  # clear_cache: true by default
    await server.Pause(V.VllmPauseRequest(mode="keep"), None)
    await server.Pause(V.VllmPauseRequest(clear_cache=False), None)
    assert fleet.sent["Pause"][0].mode == C.PAUSE_MODE_ABORT and fleet.resets == 1
    assert answer(await server.IsPaused(V.VllmIsPausedRequest(), None)) == {"is_paused": True}
    assert answer(await server.Resume(V.VllmResumeRequest(), None)) == {"status": "resumed"}
    assert answer(await server.Sleep(V.VllmSleepRequest(), None)) == {"status": "sleeping", "level": 1}
    assert fleet.sent["Sleep"][0].level == 1
    woke = await server.WakeUp(V.VllmWakeUpRequest(tags=["weights"]), None)
    assert answer(woke) == {"status": "sleeping", "tags": ["weights"]}  # one replica still asleep
    assert list(fleet.sent["WakeUp"][0].tags) == [C.SLEEP_TAG_WEIGHTS]
    assert answer(await server.WakeUp(V.VllmWakeUpRequest(), None))["tags"] is None
    await server.WakeUp(V.VllmWakeUpRequest(tags=["scheduling"]), None)
    assert list(fleet.sent["WakeUp"][0].tags) == [C.SLEEP_TAG_SCHEDULING]
    assert answer(await server.IsSleeping(V.VllmIsSleepingRequest(), None)) == {"is_sleeping": True}  # KV released
    released = await server.ReleaseKvCacheMemory(V.VllmReleaseKvCacheMemoryRequest(), None)
    assert answer(released) == {"status": "kv_cache_released"} and "ReleaseKvCache" in fleet.sent


async def test_abort_requests_and_the_weight_checker(face):
    server, fleet = face
    assert answer(await server.AbortRequests(body({}), None)) == {"status": "aborted", "aborted": 3}
    assert list(fleet.sent["AbortRequests"][0].request_ids) == []
    named = await server.AbortRequests(body({"request_ids": ["x", "y"]}), None)
    assert answer(named) == {"status": "aborted", "aborted": 2}  # vLLM counts the ids named
    assert list(fleet.sent["AbortRequests"][1].request_ids) == ["x", "y"]
    checksums = {"dp0:pp0:pcp0:tp0:w": "a", "dp1:pp0:pcp0:tp0:w": "a"}
    assert answer(await server.WeightChecker(body({"action": "checksum"}), None)) == {"checksums": checksums}
    compare = {"action": "compare", "baseline": {**checksums, "dp1:pp0:pcp0:tp0:w": "b", "z": "c"}}
    assert answer(await server.WeightChecker(body(compare), None)) == {
        "match": False,
        "mismatches": ["dp1:pp0:pcp0:tp0:w", "z"],
    }
    compare["baseline"] = checksums
    assert answer(await server.WeightChecker(body(compare), None)) == {"match": True, "mismatches": []}
    assert answer(await server.WeightChecker(body({"action": "reset"}), None)) == {"status": "reset"}
    assert "ZeroWeights" in fleet.sent


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda s: s.UpdateWeights(body({"update_info": {"packed": True}}), None), "update_info.packed"),  # 0.33: init
        (lambda s: s.UpdateWeights(body({"update_info": [{}]}), None), "update_info"),  # one replica's of two
        (lambda s: s.UpdateWeights(body({"update_info": {"tensor_sizes": [-1]}}), None), "update_info.tensor_sizes"),
        (lambda s: s.UpdateWeights(body({"update_info": {"names": "a"}}), None), "update_info.names"),
        (lambda s: s.UpdateWeights(body({}), None), "update_info"),
        (lambda s: s.InitWeightTransferEngine(body({"init_info": {"nccl_unique_id_b64": "x-_"}}), None), "init_info.n"),
        (lambda s: s.InitWeightTransferEngine(body({"init_info": {"world_size": "2"}}), None), "init_info"),
        (lambda s: s.StartWeightUpdate(body({"is_checkpoint_format": False}), None), "is_checkpoint_format"),
        (lambda s: s.UpdateWeightVersion(body({}), None), "new_version"),
        (lambda s: s.Pause(V.VllmPauseRequest(mode="later"), None), "mode"),
        (lambda s: s.WakeUp(V.VllmWakeUpRequest(tags=["all"]), None), "tags"),
        (lambda s: s.InitWeightTransferEngine(body({"init_info": {"packed_num_buffers": 0}}), None), "init_info"),
        (lambda s: s.AbortRequests(body({"request_ids": "x"}), None), "request_ids"),
        (lambda s: s.AbortRequests(body({"ids": []}), None), "ids"),
        (lambda s: s.WeightChecker(body({"action": "compare"}), None), "baseline"),
        (lambda s: s.WeightChecker(body({"action": "checksum", "baseline": {}}), None), "baseline"),
        (lambda s: s.WeightChecker(body({"action": "compare", "baseline": {"w": 1}}), None), "baseline"),
        (lambda s: s.WeightChecker(body({"action": "sum"}), None), "action"),
    ],
)
async def test_refusals_name_the_field(face, call, field):
    server, fleet = face
    with pytest.raises(ServiceError) as refused:
        await call(server)
    assert refused.value.code.name == "INVALID_ARGUMENT" and refused.value.violations[0][0].startswith(field)
    assert not set(fleet.sent) - {"GetWeightInfo"}  # refused before any replica was changed


@pytest.mark.parametrize("method", ["StartDraftWeightUpdate", "CollectiveRpc"])
async def test_routes_not_served_are_refused_by_name(face, method):
    server, _ = face
    with pytest.raises(ServiceError) as refused:
        await getattr(server, method)(body({"method": "reset_weights"}), None)
    assert refused.value.code.name == "UNIMPLEMENTED" and refused.value.reason == "RPC_NOT_SERVED"
