"""Disaggregated prefill and decode between two real engine servers (tiny model, CPU): the decode engine pulls the
prefill engine's KV blocks over KvTransferService and decodes exactly what one engine alone would, computing none
of the prompt; expiry, a lost prefill engine and mismatched layouts each end in their typed error."""

from __future__ import annotations

import asyncio

import grpc
import pytest
import torch
from google.protobuf import json_format, struct_pb2
from smg_grpc_proto.generated import vllm_engine_pb2 as vllm
from smg_grpc_proto.generated import vllm_engine_pb2_grpc

from engine_svc.serving.kv_transfer import blocks, transport, vllm_params
from engine_svc.serving.kv_transfer.pull import Puller
from scaleout.v1 import engine_pb2, kv_transfer_pb2, kv_transfer_pb2_grpc
from scaleout_common.errors import ServiceError
from tests.engine.conftest import engine_stub, request, tiny_llama

PROMPT = [1] + [(7 * j) % 150 + 5 for j in range(36)]  # 37 tokens: two full blocks of 16 and a partial one


def step(prompt, max_tokens, **transfer):
    message = request(prompt, temperature=0, max_tokens=max_tokens, ignore_eos=True)
    message.kv_transfer.CopyFrom(kv_transfer_pb2.KvTransfer(**transfer))
    return message


def tokens(response: engine_pb2.GenerateResponse) -> list[int]:
    return list(response.choices[0].token_ids)


async def reason_of(call) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return ServiceError.from_rpc_error(caught.value).reason


HANDOFF_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
async def engines(tiny_model):
    """One prefill and one decode engine for the module, and a decode engine serving other weights."""
    async with (
        engine_stub(tiny_model, "--kv-role", "prefill", "--kv-handoff-timeout-s", str(HANDOFF_TIMEOUT_S)) as p,
        engine_stub(tiny_model, "--kv-role", "decode", "--kv-pull-timeout-s", "5") as d,
        engine_stub(tiny_llama(seed=1), "--kv-role", "decode") as other,
    ):
        yield p[0], d[0], other[0], p[1]


async def used_blocks(stub) -> int:
    return (await stub.GetLoad(engine_pb2.GetLoadRequest())).kv_blocks_used


@pytest.mark.slow  # two tiny-model engines (module-scoped)
async def test_decode_from_pulled_blocks_matches_one_engine_and_computes_no_prompt(engines):
    prefill, decode, _, prefill_service = engines
    alone = tokens(await prefill.GenerateUnary(request(PROMPT, temperature=0, max_tokens=12, ignore_eos=True)))
    first = await prefill.GenerateUnary(step(PROMPT, 1, hand_off=True))
    handoff = first.kv_handoff
    assert handoff.num_tokens == len(PROMPT) and len(handoff.block_ids) == 3 and handoff.port > 0
    assert prefill_service.loaded.engine.handoffs.num_kept == 1
    before = await decode.GetLoad(engine_pb2.GetLoadRequest())
    streamed = [m async for m in decode.Generate(step(PROMPT, 12, pull=handoff))]
    after = await decode.GetLoad(engine_pb2.GetLoadRequest())
    info = await decode.GetModelInfo(engine_pb2.GetModelInfoRequest())
    server = await vllm_engine_pb2_grpc.VllmEngineStub(decode.channel).GetServerInfo(vllm.GetServerInfoRequest())
    assert server.kv_role == "kv_consumer" and server.kv_engine_id
    # pulled once: the prefill engine freed its copy, a second pull finds nothing
    assert await reason_of(decode.GenerateUnary(step(PROMPT, 4, pull=handoff))) == "KV_HANDOFF_EXPIRED"
    assert [t for m in streamed for c in m.choices for t in c.token_ids] == alone
    assert after.prompt_tokens_computed == before.prompt_tokens_computed
    assert after.prompt_tokens_transferred - before.prompt_tokens_transferred == len(PROMPT)
    assert streamed[0].prompt.cached_tokens == len(PROMPT) - 1  # all but the last token, which samples
    assert streamed[0].prompt.kv_transport == "grpc_stream"  # CPU: the stream (test_kv_ipc_cuda.py: the device)
    assert await used_blocks(prefill) == 0 and info.kv_role == "decode" and info.kv_layout.block_size == 16


@pytest.mark.slow  # two tiny-model engines (module-scoped)
async def test_roles_refuse_the_other_step_and_vllm_params_map_both_ways(engines):
    prefill, decode, _, _ = engines
    assert await reason_of(decode.GenerateUnary(step(PROMPT, 1, hand_off=True))) == "KV_TRANSFER_UNAVAILABLE"
    asked = request(PROMPT, temperature=0, max_tokens=1)
    asked.kv_transfer_params.update({"do_remote_decode": True, "do_remote_prefill": False, "remote_host": None})
    answer = await prefill.GenerateUnary(asked)
    params = dict(answer.kv_transfer_params)
    assert params["do_remote_prefill"] is True and params["remote_request_id"] == answer.kv_handoff.handoff_id
    assert params["remote_port"] == answer.kv_handoff.port and params["tp_size"] == 1
    assert await reason_of(prefill.GenerateUnary(_vllm_decode(params))) == "KV_TRANSFER_UNAVAILABLE"
    out = await decode.GenerateUnary(_vllm_decode(params))
    unknown = request(PROMPT, max_tokens=1)
    unknown.kv_transfer_params.update({"do_remote_decode": True, "bootstrap_room": 7})
    assert await reason_of(prefill.GenerateUnary(unknown)) == "INVALID_KV_TRANSFER"
    assert len(out.choices[0].token_ids) == 3


def _vllm_decode(params) -> engine_pb2.GenerateRequest:
    message = request(PROMPT, temperature=0, max_tokens=3, ignore_eos=True)
    message.kv_transfer_params.update(params)
    return message


@pytest.mark.slow  # two tiny-model engines (module-scoped)
async def test_unpulled_blocks_expire_and_a_late_pull_is_refused(engines):
    prefill, decode, _, _ = engines
    handoff = (await prefill.GenerateUnary(step(PROMPT, 1, hand_off=True))).kv_handoff
    held = await used_blocks(prefill)
    await asyncio.sleep(HANDOFF_TIMEOUT_S + 0.3)
    assert held == 3 and await used_blocks(prefill) == 0
    assert await reason_of(decode.GenerateUnary(step(PROMPT, 4, pull=handoff))) == "KV_HANDOFF_EXPIRED"


@pytest.mark.slow  # two tiny-model engines (module-scoped)
async def test_a_lost_prefill_engine_is_a_typed_error(engines, tiny_model):
    prefill, decode, _, _ = engines
    async with engine_stub(tiny_model, "--kv-role", "prefill") as (gone, _):
        handoff = (await gone.GenerateUnary(step(PROMPT, 1, hand_off=True))).kv_handoff
    # the engine that kept the blocks is gone; then another process serves its address
    assert await reason_of(decode.GenerateUnary(step(PROMPT, 4, pull=handoff))) == "KV_HANDOFF_ENGINE_GONE"
    handoff.port = (await prefill.GenerateUnary(step(PROMPT, 1, hand_off=True))).kv_handoff.port
    assert await reason_of(decode.GenerateUnary(step(PROMPT, 4, pull=handoff))) == "KV_HANDOFF_ENGINE_GONE"


@pytest.mark.slow  # two tiny-model engines (module-scoped)
async def test_mismatches_are_refused_and_the_blocks_stay_for_the_right_decode(engines):
    prefill, decode, other_weights, prefill_service = engines
    handoff = (await prefill.GenerateUnary(step(PROMPT, 1, hand_off=True))).kv_handoff
    for stub, prompt in ((other_weights, PROMPT), (decode, PROMPT[:-1] + [9])):
        assert await reason_of(stub.GenerateUnary(step(prompt, 4, pull=handoff))) == "KV_HANDOFF_MISMATCH"
    assert prefill_service.loaded.engine.handoffs.peek(handoff.handoff_id) is not None
    assert len(tokens(await decode.GenerateUnary(step(PROMPT, 2, pull=handoff)))) == 2


async def _released(handoffs, before: int) -> bool:
    """Whether a claimed handoff was handed back to be freed (the call's end runs the stream's `finally`)."""
    for _ in range(100):
        if handoffs.released > before:
            return True
        await asyncio.sleep(0.02)
    return False


@pytest.mark.slow  # two tiny-model engines (module-scoped)
async def test_the_device_path_shares_no_cpu_cache_and_claims_blocks_until_the_call_ends(engines):
    """CPU CI's share of the CUDA IPC path: ShareKvCache answers the engine's device (no handles off CUDA), and a
    pull naming the cache's generation claims the blocks (one empty chunk), keeps them while the caller copies,
    and frees them when it ends the call; a stale generation is KV_CACHE_REMAPPED."""
    prefill, decode, _, prefill_service = engines
    layout = (await decode.GetModelInfo(engine_pb2.GetModelInfoRequest())).kv_layout
    handoff = (await prefill.GenerateUnary(step(PROMPT, 1, hand_off=True))).kv_handoff
    peer = kv_transfer_pb2_grpc.KvTransferServiceStub(prefill.channel)
    me = transport.device_of(torch.device("cpu"))
    share = kv_transfer_pb2.ShareKvCacheRequest(engine_id=handoff.engine_id, layout=layout, device=me)
    shared = await peer.ShareKvCache(share)
    assert shared.device.host_id == me.host_id and not shared.device.device_uuid and not shared.layers
    assert shared.cache_generation == prefill_service.loaded.engine.runner.kv_generation >= 1
    share.layout.block_size = 8
    assert await reason_of(peer.ShareKvCache(share)) == "KV_HANDOFF_MISMATCH"
    pull = kv_transfer_pb2.PullKvBlocksRequest(
        engine_id=handoff.engine_id, handoff_id=handoff.handoff_id, block_ids=handoff.block_ids, layout=layout
    )
    pull.token_ids.extend(PROMPT)
    pull.cache_generation = shared.cache_generation + 1
    assert await reason_of(peer.PullKvBlocks(pull).read()) == "KV_CACHE_REMAPPED"
    pull.cache_generation = shared.cache_generation
    call = peer.PullKvBlocks(pull)
    assert (await call.read()).data == b""
    handoffs = prefill_service.loaded.engine.handoffs
    released = handoffs.released
    assert handoffs.peek(handoff.handoff_id) is None  # claimed: held while the call lasts, then freed
    await asyncio.sleep(0.1)
    assert handoffs.released == released
    call.cancel()
    assert await _released(handoffs, released)


@pytest.mark.slow  # two tiny-model engines (module-scoped)
async def test_a_puller_on_a_gpu_asks_once_and_streams_from_an_engine_it_cannot_map(engines):
    prefill, decode, _, _ = engines
    layout = (await decode.GetModelInfo(engine_pb2.GetModelInfoRequest())).kv_layout
    puller = Puller(layout, torch.device("cpu"), None)
    puller.me = kv_transfer_pb2.KvDevice(host_id=transport.host_id(), device_uuid="GPU-here", process_id="other")
    for _ in range(2):
        handoff = (await prefill.GenerateUnary(step(PROMPT, 1, hand_off=True))).kv_handoff
        pulled = await puller.pull(handoff, PROMPT, 5)
        assert pulled.data.shape[0] == len(handoff.block_ids) and pulled.ready is None
    assert puller.pulls == {transport.STREAM: 2} and puller.mapped == {handoff.engine_id: None}


def test_layouts_differ_by_any_field():
    mine = kv_transfer_pb2.KvLayout(block_size=16, dtype="float32", num_layers=2, fingerprint="a")
    assert blocks.mismatch(mine, mine) == ""
    for change in ({"block_size": 8}, {"dtype": "bfloat16"}, {"num_layers": 3}, {"fingerprint": "b"}):
        theirs = kv_transfer_pb2.KvLayout()
        theirs.CopyFrom(mine)
        for name, value in change.items():
            setattr(theirs, name, value)
        assert blocks.mismatch(mine, theirs).startswith(next(iter(change)))


HANDOFF = kv_transfer_pb2.KvHandoff(
    engine_id="e1", host="10.0.0.2", port=50052, handoff_id="h1", block_ids=[4, 5], num_tokens=20, tp_size=1
)


def _params(**values) -> struct_pb2.Struct:
    params = struct_pb2.Struct()
    params.update(values)
    return params


def test_vllm_params_map_both_ways():
    assert vllm_params.parse(_params()) is None
    assert vllm_params.parse(_params(do_remote_decode=False, do_remote_prefill=False, remote_host=None)) is None
    asked = vllm_params.parse(_params(do_remote_decode=True, remote_engine_id=None, remote_block_ids=None))
    assert asked == kv_transfer_pb2.KvTransfer(hand_off=True)
    answer = json_format.MessageToDict(vllm_params.answer(HANDOFF))
    assert answer["do_remote_prefill"] and not answer["do_remote_decode"] and answer["remote_request_id"] == "h1"
    assert vllm_params.parse(vllm_params.answer(HANDOFF)) == kv_transfer_pb2.KvTransfer(pull=HANDOFF)
    grouped = json_format.MessageToDict(vllm_params.answer(HANDOFF)) | {"remote_block_ids": [[4, 5]], "pp_size": 1}
    assert vllm_params.parse(_params(**grouped)) == kv_transfer_pb2.KvTransfer(pull=HANDOFF)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"bootstrap_room": 1}, "bootstrap_room"),
        ({"do_remote_decode": True}, "do_remote_prefill"),
        ({"tp_size": 2}, "tp_size"),
        ({"remote_host": None}, "remote_host"),
        ({"remote_port": "50052"}, "remote_port"),
        ({"remote_block_ids": "4,5"}, "remote_block_ids"),
        ({"do_remote_prefill": "yes"}, "do_remote_prefill"),
        ({"remote_blocks_expiry_time": 1.0}, "remote_blocks_expiry_time"),
        ({"transfer_mode": "read"}, "transfer_mode"),
    ],
)
def test_vllm_params_refused_name_their_key(change, field):
    params = json_format.MessageToDict(vllm_params.answer(HANDOFF)) | change
    with pytest.raises(ServiceError) as caught:
        vllm_params.parse(_params(**params))
    assert (
        caught.value.reason == "INVALID_KV_TRANSFER" and caught.value.violations[0][0] == f"kv_transfer_params.{field}"
    )
