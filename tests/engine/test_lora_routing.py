"""What routers read of an engine's LoRA adapters, as vLLM 0.33 gives it: BlockStored's lora_id and lora_name on
the ZMQ KV-event stream (decoded by vLLM's own classes) and on SubscribeKvEvents, GetLoad's adapters and
vllm:lora_requests_info (llm-d's LoRA affinity), GetModelInfo's lora_config (/server_info's)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

import grpc
import zmq
import zmq.asyncio
from prometheus_client.parser import text_string_to_metric_families

from engine_svc.__main__ import make_parser
from engine_svc.serving.loader import build_engine
from engine_svc.serving.service import EngineService
from scaleout.v1 import control_pb2_grpc, engine_pb2, engine_pb2_grpc, kv_events_pb2
from scaleout_common import prefix_hash
from tests.engine.conftest import engine_stub, generate, request, tiny_llama
from tests.engine.test_kv_events_zmq import VLLM_PYTHON, _free_port, _replay, decode
from tests.engine.test_lora import PROMPT, adapters  # noqa: F401  (fixture)
from tests.observability.toy import serving

# vLLM's classes decode the replayed frames: per BlockStored, its hashes, parent, tokens and adapter.
DECODER = """
import json, sys, msgspec
from vllm.distributed.kv_events import BlockStored, KVEventBatch
print("ready", flush=True)
decode = msgspec.msgpack.Decoder(type=KVEventBatch).decode
out = [[[h.hex() for h in e.block_hashes], e.parent_block_hash.hex() if e.parent_block_hash else None,
        list(e.token_ids), e.lora_id, e.lora_name]
       for _, payload in msgspec.msgpack.decode(open(sys.stdin.readline().strip(), "rb").read())
       for e in decode(payload).events if isinstance(e, BlockStored)]
print(json.dumps(out), flush=True)
"""


def _message(name: str, max_tokens: int = 4):
    m = request(PROMPT, temperature=0, max_tokens=max_tokens, ignore_eos=True)
    m.lora_name = name
    return m


async def test_kv_events_name_the_adapter_and_vllms_classes_decode_them(adapters, tmp_path, monkeypatch):  # noqa: F811
    """The same prompt under 'attn' and under the base model: vLLM's BlockStored carries lora_id 1 and lora_name
    'attn' for the adapter's blocks, None for the base model's, and the hashes follow from the tokens and the
    adapter's id (prefix_hash.root); SubscribeKvEvents' snapshot says the same; GetModelInfo has the flags."""
    monkeypatch.setenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "0")
    decoder = subprocess.Popen(
        [VLLM_PYTHON, "-c", DECODER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    replay = _free_port()
    config = {"enable_kv_cache_events": True, "endpoint": f"tcp://*:{_free_port()}"}
    config["replay_endpoint"] = f"tcp://*:{replay}"
    flags = ("--enable-lora", "--lora-modules", f"attn={adapters['attn']}", "--max-lora-rank", "8",
             "--block-size", "4", "--kv-events-config", json.dumps(config), "--engine-core", "thread")  # fmt: skip
    ctx = zmq.asyncio.Context()
    try:
        async with engine_stub(tiny_llama(), *flags) as (stub, _):
            for name in ("attn", ""):
                await generate(stub, _message(name))
            await asyncio.sleep(0.3)  # the step's batch reaches the publisher
            frames = await _replay(ctx, f"tcp://127.0.0.1:{replay}", 0)
            stream = control_pb2_grpc.EngineControlServiceStub(stub.channel).SubscribeKvEvents(
                kv_events_pb2.SubscribeKvEventsRequest()
            )
            snapshot = await stream.read()
            stream.cancel()
            info = await stub.GetModelInfo(engine_pb2.GetModelInfoRequest())
        stored = await decode(decoder, tmp_path, frames)
    finally:
        decoder.kill()
        ctx.term()
    assert {(lora_id, lora_name) for *_, lora_id, lora_name in stored} == {(1, "attn"), (None, None)}
    for hashes, parent, tokens, lora_id, _ in stored:
        previous = bytes.fromhex(parent) if parent else prefix_hash.root("", lora_id or 0)
        for i, h in enumerate(hashes):
            previous = prefix_hash.block_hash(previous, tokens[4 * i : 4 * i + 4])
            assert previous.hex() == h
    runs = [e.blocks_stored for e in snapshot.events if e.WhichOneof("event") == "blocks_stored"]
    assert {(r.lora_id, r.lora_name) for r in runs} == {(1, "attn"), (0, "")}
    assert (info.lora_config.max_lora_rank, info.lora_config.max_loras, info.lora_config.max_cpu_loras) == (8, 1, 1)


async def test_load_and_lora_requests_info_name_the_running_adapters(adapters):  # noqa: F811
    """While an 'attn' stream runs: GetLoad's running_lora_adapters and vllm:lora_requests_info's labels name it,
    with --max-loras; once it ends, none runs. An engine without LoRA makes no such series and no lora_config."""
    flags = ["--enable-lora", "--lora-modules", f"attn={adapters['attn']}", "--max-loras", "2",
             "--block-size", "4", "--engine-core", "thread"]  # fmt: skip
    args = make_parser().parse_args(flags)
    service = EngineService(args, build=lambda: build_engine(tiny_llama(), args, model_name="tiny"))
    async with serving(service, metrics=True) as served, grpc.aio.insecure_channel(served.target) as channel:
        stub = engine_pb2_grpc.EngineServiceStub(channel)
        stream = stub.Generate(_message("attn", max_tokens=400))
        await stream.read()
        during = await stub.GetLoad(engine_pb2.GetLoadRequest())
        during_info = _lora_info(await stub.GetMetrics(engine_pb2.GetMetricsRequest()))
        stream.cancel()
        await asyncio.sleep(0.2)
        after = _lora_info(await stub.GetMetrics(engine_pb2.GetMetricsRequest()))
    assert during.max_loras == 2 and list(during.running_lora_adapters) == ["attn"]
    assert not during.waiting_lora_adapters
    assert during_info == {"max_lora": "2", "running_lora_adapters": "attn", "waiting_lora_adapters": ""}
    assert after == {"max_lora": "2", "running_lora_adapters": "", "waiting_lora_adapters": ""}

    plain = make_parser().parse_args(["--block-size", "4"])
    service = EngineService(plain, build=lambda: build_engine(tiny_llama(), plain, model_name="tiny"))
    async with serving(service, metrics=True) as served, grpc.aio.insecure_channel(served.target) as channel:
        stub = engine_pb2_grpc.EngineServiceStub(channel)
        body = await stub.GetMetrics(engine_pb2.GetMetricsRequest())
        load = await stub.GetLoad(engine_pb2.GetLoadRequest())
        info = await stub.GetModelInfo(engine_pb2.GetModelInfoRequest())
    assert "vllm:lora_requests_info" not in body.data.decode() and load.max_loras == 0
    assert not info.HasField("lora_config")


def _lora_info(body) -> dict[str, str]:
    """vllm:lora_requests_info's one sample: its labels (less ours), its value the scrape time as vLLM's."""
    families = {f.name: f for f in text_string_to_metric_families(body.data.decode())}
    (sample,) = families["vllm:lora_requests_info"].samples
    assert abs(sample.value - time.time()) < 60
    return {k: v for k, v in sample.labels.items() if k not in ("model_name", "engine")}


async def test_an_engine_core_process_reports_the_adapters_too(adapters):  # noqa: F811
    """The step loop in a child process: the sequences' adapter names cross the pipe into GetLoad and the KV events."""
    flags = ("--enable-lora", "--lora-modules", f"attn={adapters['attn']}", "--block-size", "4", "--kv-events",
             "--engine-core", "process")  # fmt: skip
    async with engine_stub(None, *flags) as (stub, _):
        stream = stub.Generate(_message("attn", max_tokens=400))
        await stream.read()
        during = await stub.GetLoad(engine_pb2.GetLoadRequest())
        stream.cancel()
        events = control_pb2_grpc.EngineControlServiceStub(stub.channel).SubscribeKvEvents(
            kv_events_pb2.SubscribeKvEventsRequest()
        )
        snapshot = await events.read()
        events.cancel()
    assert during.max_loras == 1 and list(during.running_lora_adapters) == ["attn"]
    runs = [e.blocks_stored for e in snapshot.events if e.WhichOneof("event") == "blocks_stored"]
    assert runs and {(r.lora_id, r.lora_name) for r in runs} == {(1, "attn")}
