"""The RL control plane on one real engine server: weight updates from a trainer process over gloo and from disk,
pause in each mode with requests in flight, sleep and wake (EngineControlService; docs/rl.md)."""

from __future__ import annotations

import asyncio

import grpc
import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families
from safetensors.torch import save_file

from engine_svc.model import weights
from examples import rl_trainer
from scaleout.v1 import common_pb2, control_pb2, control_pb2_grpc, engine_pb2
from tests.engine.conftest import engine_stub, generate, request, tiny_llama
from tests.engine.rl_trainer_process import VLLM_PACKER, Trainer
from tests.engine.test_generate import reference

pytestmark = pytest.mark.slow  # a real engine server (a tiny model)
C = control_pb2
PROMPT = [1] + [(7 * j) % 190 + 5 for j in range(22)]  # 23 tokens: 5 full blocks of 4
TRAINER = Trainer()  # forked now, during collection: before any test runs gloo here (rl_trainer_process.py)


@pytest.fixture(scope="module")
def trainer():
    yield TRAINER
    TRAINER.close()


@pytest.fixture(scope="module")
async def engine():
    flags = ("--block-size", "4", "--max-num-batched-tokens", "64", "--weight-transfer-backend", "nccl", "--kv-events")
    async with engine_stub(None, *flags) as (stub, service):
        yield stub, control_pb2_grpc.EngineControlServiceStub(stub.channel), service


def updates(*seeds: int) -> dict[int, torch.nn.Module]:
    return {seed: tiny_llama(seed) for seed in seeds}


MODELS = updates(0, 1, 2, 3)  # 0: what the engine loads (build_tiny)


async def greedy(stub, prompt=PROMPT, max_tokens=8):
    messages, tokens = await generate(stub, request(prompt, temperature=0, max_tokens=max_tokens, ignore_eos=True))
    return tokens[0], messages


async def from_disk(control, service, tmp_path, seed: int, version: str) -> C.FinishWeightUpdateResponse:
    service.args.weight_transfer_backend = "disk"
    folder = tmp_path / f"seed{seed}"
    folder.mkdir(parents=True)
    save_file({k: v.detach().contiguous() for k, v in MODELS[seed].named_parameters()}, str(folder / "w.safetensors"))
    await control.InitWeightTransfer(C.InitWeightTransferRequest())
    await control.StartWeightUpdate(C.StartWeightUpdateRequest())
    loaded = await control.UpdateWeights(C.UpdateWeightsRequest(path=str(folder)))
    assert loaded.tensors == len(list(MODELS[seed].parameters()))
    return await control.FinishWeightUpdate(C.FinishWeightUpdateRequest(weight_version=version))


async def test_a_trainer_process_updates_the_weights_over_gloo(trainer, engine):
    stub, control, service = engine
    before, _ = await greedy(stub)
    assert before == reference(MODELS[0], PROMPT, 8)
    _, again = await greedy(stub)
    assert again[0].prompt.cached_tokens == 20  # the prompt's full blocks are cached
    hub = service.loaded.engine.kv_events
    assert hub.table()  # what KV-event subscribers mirror
    port = trainer.start({k: v.detach() for k, v in MODELS[1].named_parameters()})
    try:
        service.args.weight_transfer_backend = "nccl"
        init = C.InitWeightTransferRequest(master_address="127.0.0.1", master_port=port, rank=1, world_size=2)
        assert (await control.InitWeightTransfer(init)).backend == "nccl (gloo)"
        await control.StartWeightUpdate(C.StartWeightUpdateRequest())
        spec = rl_trainer.specs(dict(MODELS[1].named_parameters()))
        shapes = [C.TensorShape(dims=s) for s in spec["shapes"]]
        update = C.UpdateWeightsRequest(names=spec["names"], dtypes=spec["dtype_names"], shapes=shapes)
        assert (await control.UpdateWeights(update)).tensors == len(spec["names"])
        finished = await control.FinishWeightUpdate(C.FinishWeightUpdateRequest(weight_version="step-1"))
    finally:
        trainer.done()
    assert finished.weight_version == "step-1" and finished.blocks_dropped >= 5
    await control.GetPauseState(C.GetPauseStateRequest())  # a later turn of the step loop: its KV events are out
    assert hub.table() == {}  # AllBlocksCleared went out with the update
    after, messages = await greedy(stub)
    assert after == reference(MODELS[1], PROMPT, 8) != before  # as a fresh engine with the new weights
    assert messages[0].prompt.cached_tokens == 0  # nothing computed by the old weights is reused
    assert {m.weight_version for m in messages} == {"step-1"}
    info = await stub.GetModelInfo(engine_pb2.GetModelInfoRequest())
    assert info.weight_version == "step-1"


@pytest.mark.parametrize(
    "packer",
    [pytest.param("vllm", marks=pytest.mark.skipif(not VLLM_PACKER.exists(), reason="vLLM 0.33 is absent")), "ours"],
)
async def test_packed_broadcasts_cut_as_vllms_trainer_cuts_them(trainer, engine, packer):
    stub, control, service = engine
    state = {k: v.detach() for k, v in MODELS[3].named_parameters()}
    packed_bytes = sum(t.numel() * t.element_size() for t in state.values()) // 5  # ~5 buffers, cut mid-tensor list
    port = trainer.start(state, rounds=2, packed_bytes=packed_bytes, packer=packer)
    try:
        service.args.weight_transfer_backend = "nccl"
        init = C.InitWeightTransferRequest(master_address="127.0.0.1", master_port=port, rank=1, world_size=2)
        init.packed, init.packed_buffer_size_bytes = True, packed_bytes
        await control.InitWeightTransfer(init)
        await control.StartWeightUpdate(C.StartWeightUpdateRequest())
        spec = rl_trainer.specs(state)
        shapes = [C.TensorShape(dims=s) for s in spec["shapes"]]
        update = C.UpdateWeightsRequest(names=spec["names"], dtypes=spec["dtype_names"], shapes=shapes)
        assert (await control.UpdateWeights(update)).tensors == len(state)
        await control.FinishWeightUpdate(C.FinishWeightUpdateRequest(weight_version="packed"))
        assert (await greedy(stub))[0] == reference(MODELS[3], PROMPT, 8)
        digests = weights.digests(state)  # vLLM's weight_checker digest of the trainer's own tensors
        held = dict((await control.GetWeightChecksums(C.GetWeightChecksumsRequest())).checksums)
        assert {name: held[name] for name in state} == digests
        await control.ZeroWeights(C.ZeroWeightsRequest())
        zeroed = (await control.GetWeightChecksums(C.GetWeightChecksumsRequest())).checksums
        assert all(zeroed[name] != digest for name, digest in digests.items())
        # An update naming nothing sends the previous one's tensors again (what vLLM's trainer does when unchanged).
        await control.StartWeightUpdate(C.StartWeightUpdateRequest())
        assert (await control.UpdateWeights(C.UpdateWeightsRequest())).tensors == len(state)
        await control.FinishWeightUpdate(C.FinishWeightUpdateRequest())
    finally:
        trainer.done()
    held = dict((await control.GetWeightChecksums(C.GetWeightChecksumsRequest())).checksums)
    assert {name: held[name] for name in state} == digests
    await control.ShutdownWeightTransfer(C.ShutdownWeightTransferRequest())
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await control.StartWeightUpdate(C.StartWeightUpdateRequest())
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # shut down: init again first


async def test_weights_from_a_safetensors_folder_and_their_refusals(engine, tmp_path):
    stub, control, service = engine
    finished = await from_disk(control, service, tmp_path, 2, "step-2")
    assert finished.weight_version == "step-2"
    assert (await greedy(stub))[0] == reference(MODELS[2], PROMPT, 8)
    await control.SetWeightVersion(C.SetWeightVersionRequest(weight_version="step-2b"))
    assert (await control.GetWeightInfo(C.GetWeightInfoRequest())).weight_version == "step-2b"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await control.UpdateWeights(C.UpdateWeightsRequest(path=str(tmp_path)))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # before StartWeightUpdate
    await control.StartWeightUpdate(C.StartWeightUpdateRequest())
    save_file({"model.nope": torch.zeros(2)}, str(tmp_path / "odd.safetensors"))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await control.UpdateWeights(C.UpdateWeightsRequest(path=str(tmp_path)))  # a tensor the model lacks
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "model.nope" in refused.value.details()
    await control.FinishWeightUpdate(C.FinishWeightUpdateRequest())
    assert (await greedy(stub))[0] == reference(MODELS[2], PROMPT, 8)  # nothing was written


@pytest.mark.parametrize(
    ("backend", "init", "code"),
    [
        ("nccl", {"nccl_unique_id": bytes(128), "rank": 1, "world_size": 2}, "FAILED_PRECONDITION"),  # CUDA only
        ("nccl", {"nccl_unique_id": bytes(128), "master_address": "h", "rank": 1, "world_size": 2}, "INVALID_ARGUMENT"),
        ("nccl", {"master_address": "127.0.0.1", "master_port": 1, "rank": 2, "world_size": 2}, "INVALID_ARGUMENT"),
        ("ipc", {"packed": True}, "FAILED_PRECONDITION"),  # CUDA only
        ("disk", {"packed": True}, "FAILED_PRECONDITION"),
    ],
)
async def test_what_a_cpu_engine_cannot_join_is_refused(engine, backend, init, code):
    _, control, service = engine
    service.args.weight_transfer_backend = backend
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await control.InitWeightTransfer(C.InitWeightTransferRequest(**init))
    assert refused.value.code().name == code


async def _until_tokens(call, count: int) -> list[engine_pb2.GenerateResponse]:
    """The stream's first messages, until they hold `count` tokens."""
    messages: list[engine_pb2.GenerateResponse] = []
    async for message in call:
        messages.append(message)
        if sum(len(c.token_ids) for m in messages for c in m.choices) >= count:
            return messages
    raise AssertionError("the stream ended early")


async def test_pause_abort_ends_requests_and_refuses_new_ones_until_resume(engine):
    stub, control, _ = engine
    call = stub.Generate(request(PROMPT, temperature=0, max_tokens=400, ignore_eos=True))
    await _until_tokens(call, 1)
    assert (await control.Pause(C.PauseRequest(mode=C.PAUSE_MODE_ABORT))).aborted == 1
    rest = [m async for m in call]
    assert rest[-1].choices[-1].finish_reason == common_pb2.FINISH_REASON_ABORT
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await greedy(stub)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    state = await control.GetPauseState(C.GetPauseStateRequest())
    assert state.paused and state.mode == C.PAUSE_MODE_ABORT
    await control.Resume(C.ResumeRequest())
    assert not (await control.GetPauseState(C.GetPauseStateRequest())).paused
    assert len((await greedy(stub))[0]) == 8


async def test_pause_wait_answers_once_in_flight_requests_finished(engine):
    stub, control, _ = engine
    call = stub.Generate(request(PROMPT, temperature=0, max_tokens=30, ignore_eos=True))
    await _until_tokens(call, 1)
    await control.Pause(C.PauseRequest(mode=C.PAUSE_MODE_WAIT))
    load = await stub.GetLoad(engine_pb2.GetLoadRequest())
    rest = [m async for m in call]
    assert (load.running, load.waiting) == (0, 0) and rest[-1].choices[
        -1
    ].finish_reason == common_pb2.FINISH_REASON_LENGTH
    assert (await control.GetPauseState(C.GetPauseStateRequest())).mode == C.PAUSE_MODE_WAIT
    await control.Resume(C.ResumeRequest())


async def test_pause_keep_freezes_requests_across_a_weight_update(engine, tmp_path):
    stub, control, service = engine
    await from_disk(control, service, tmp_path, 1, "keep-old")
    call = stub.Generate(request(PROMPT, temperature=0, max_tokens=24, ignore_eos=True))
    first = await _until_tokens(call, 2)
    await control.Pause(C.PauseRequest(mode=C.PAUSE_MODE_KEEP))
    queued = asyncio.ensure_future(greedy(stub))  # accepted while frozen: it runs after Resume
    await from_disk(control, service, tmp_path / "new", 2, "keep-new")
    await control.Resume(C.ResumeRequest())
    messages = first + [m async for m in call]
    by_version: dict[str, list[int]] = {}
    for m in messages:
        by_version.setdefault(m.weight_version, []).extend(t for c in m.choices for t in c.token_ids)
    old, new = by_version["keep-old"], by_version["keep-new"]
    assert len(old) + len(new) == 24 and old == reference(MODELS[1], PROMPT, 24)[: len(old)]
    # After the update every token is the new weights' continuation of all that came before.
    assert new == reference(MODELS[2], PROMPT + old, len(new))
    assert (await queued)[0] == reference(MODELS[2], PROMPT, 8)


def sleep_gauge(service) -> list[float]:
    """vllm:engine_sleep_state's awake, weights_offloaded, discard_all (the face reads the engine's sleep level)."""
    (family,) = [f for f in text_string_to_metric_families(service.vllm.exposition().decode()) if "sleep" in f.name]
    return [sample.value for sample in family.samples]


async def test_sleep_and_wake_up_by_tags(engine, tmp_path):
    stub, control, service = engine
    await from_disk(control, service, tmp_path, 1, "sleepy")
    await control.Sleep(C.SleepRequest(level=1))
    state = await control.GetSleepState(C.GetSleepStateRequest())
    assert state.sleeping and state.level == 1 and list(state.asleep) == [C.SLEEP_TAG_KV_CACHE]  # CPU: weights stay
    assert service.loaded.engine.runner.kv_caches == []
    assert sleep_gauge(service) == [0, 1, 0]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await greedy(stub)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert (await control.WakeUp(C.WakeUpRequest(tags=[C.SLEEP_TAG_KV_CACHE]))).awake
    assert (await greedy(stub))[0] == reference(MODELS[1], PROMPT, 8)
    # Level 2 drops the weights: woken up, they must be loaded again.
    await control.Sleep(C.SleepRequest(level=2))
    assert set((await control.GetSleepState(C.GetSleepStateRequest())).asleep) == {1, 2}
    assert sleep_gauge(service) == [0, 0, 1]
    assert not (await control.WakeUp(C.WakeUpRequest(tags=[C.SLEEP_TAG_WEIGHTS]))).awake
    with pytest.raises(grpc.aio.AioRpcError):
        await control.Sleep(C.SleepRequest(level=3))
    assert (await control.WakeUp(C.WakeUpRequest())).awake
    assert sleep_gauge(service) == [1, 0, 0]
    await from_disk(control, service, tmp_path / "again", 2, "awake")
    assert (await greedy(stub))[0] == reference(MODELS[2], PROMPT, 8)


async def test_abort_requests_by_id_or_all_and_release_the_kv_cache(engine):
    stub, control, service = engine
    calls = [
        stub.Generate(request(PROMPT, request_id=f"r{i}", temperature=0, max_tokens=400, ignore_eos=True))
        for i in range(3)
    ]
    for call in calls:
        await _until_tokens(call, 1)
    assert (await control.AbortRequests(C.AbortRequestsRequest(request_ids=["r0", "gone"]))).aborted == 1
    assert (await control.AbortRequests(C.AbortRequestsRequest())).aborted == 2  # none named: every one
    for call in calls:
        assert [m async for m in call][-1].choices[-1].finish_reason == common_pb2.FINISH_REASON_ABORT
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await control.ReleaseKvCache(C.ReleaseKvCacheRequest())
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # only while paused
    await control.Pause(C.PauseRequest(mode=C.PAUSE_MODE_KEEP))
    await control.ReleaseKvCache(C.ReleaseKvCacheRequest())
    assert service.loaded.engine.runner.kv_caches == []
    assert (await control.WakeUp(C.WakeUpRequest(tags=[C.SLEEP_TAG_KV_CACHE]))).awake
    await control.Resume(C.ResumeRequest())
    assert len((await greedy(stub))[0]) == 8
