"""Every way a KV pull can fail ends typed, never INTERNAL (no servers: a stand-in prefill peer, and one in-process
tiny engine for the landing): concurrent first pulls from one engine ask ShareKvCache once and map once; no device
memory for the staging tensor streams before anything is claimed; the device running out (or faulting) once the
blocks are claimed is KV_PULL_NO_MEMORY (KV_PULL_FAILED); on the decode engine, too few free blocks or no memory to
land the pulled K/V fails that request alone (KV_HANDOFF_NO_ROOM, KV_PULL_NO_MEMORY) and the engine serves on."""

from __future__ import annotations

import asyncio

import pytest
import torch

from engine_svc.scheduling.admission import admit
from engine_svc.serving.kv_transfer import blocks, pull, transport
from engine_svc.serving.loader import build_engine
from engine_svc.serving.streaming import collect
from scaleout.v1 import kv_transfer_pb2
from scaleout_common.errors import ServiceError
from tests.engine.conftest import engine_args, request

LAYOUT = kv_transfer_pb2.KvLayout(block_size=4, dtype="float32", num_layers=2, num_kv_heads=2, head_dim=8)
HANDOFF = kv_transfer_pb2.KvHandoff(engine_id="prefill", host="127.0.0.1", port=1, block_ids=[3, 7], num_tokens=8)
PROMPT = list(range(10, 19))


class Peer:
    """A prefill engine's KvTransferService: its cache as the decode side maps it, and what it was asked."""

    def __init__(self):
        self.cache = [torch.randn(10 * LAYOUT.block_size, 2, 2, 8) for _ in range(LAYOUT.num_layers)]
        self.shares = self.claims = self.streams = 0

    async def ShareKvCache(self, request, **_):
        self.shares += 1
        await asyncio.sleep(0.01)  # the other first pulls arrive meanwhile
        there = kv_transfer_pb2.KvDevice(host_id=transport.host_id(), device_uuid="GPU-1", process_id="prefill")
        layers = [kv_transfer_pb2.CudaIpcTensor() for _ in self.cache]
        return kv_transfer_pb2.ShareKvCacheResponse(device=there, cache_generation=1, layers=layers)

    def PullKvBlocks(self, request, **_):
        return Call(self, request)


class Call:
    def __init__(self, peer: Peer, request):
        self.peer, self.request = peer, request

    async def read(self):  # the device path's claim: one empty chunk
        self.peer.claims += 1
        return kv_transfer_pb2.KvBlockChunk()

    async def __aiter__(self):
        self.peer.streams += 1
        yield kv_transfer_pb2.KvBlockChunk(data=blocks.read(self.peer.cache, LAYOUT.block_size, HANDOFF.block_ids))

    def cancel(self):
        pass


class Channel:
    async def close(self):
        pass


@pytest.fixture
def peer(monkeypatch):
    """A puller that sees itself on the prefill engine's GPU (another process) and maps its cache (CPU tensors)."""
    peer, opened = Peer(), []
    monkeypatch.setattr(pull, "open_channel", lambda where, tls_name: Channel())
    monkeypatch.setattr(pull.kv_transfer_pb2_grpc, "KvTransferServiceStub", lambda channel: peer)
    monkeypatch.setattr(transport, "open_shared", lambda layers, layout, device: opened.append(1) or peer.cache)
    peer.opened = opened
    return peer


def puller() -> pull.Puller:
    puller = pull.Puller(LAYOUT, torch.device("cpu"), None)
    puller.me = kv_transfer_pb2.KvDevice(host_id=transport.host_id(), device_uuid="GPU-1", process_id="decode")
    return puller


async def test_concurrent_first_pulls_ask_and_map_once(peer):
    mine = puller()
    pulled = await asyncio.gather(*(mine.pull(HANDOFF, PROMPT, 5) for _ in range(16)))
    expected = blocks.gather(peer.cache, LAYOUT.block_size, list(HANDOFF.block_ids))
    assert peer.shares == 1 and len(peer.opened) == 1 and peer.claims == 16 and peer.streams == 0
    assert mine.pulls == {transport.CUDA_IPC: 16} and all(torch.equal(p.data, expected) for p in pulled)


async def test_no_memory_to_stage_streams_before_claiming(peer, monkeypatch):
    def no_memory(*_):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(blocks, "empty", no_memory)
    mine = puller()
    data = (await mine.pull(HANDOFF, PROMPT, 5)).data
    assert peer.claims == 0 and peer.streams == 1 and mine.pulls == {transport.STREAM: 1}
    assert torch.equal(data, blocks.gather(peer.cache, LAYOUT.block_size, list(HANDOFF.block_ids)))


@pytest.mark.parametrize(
    "error, reason",
    [
        (torch.OutOfMemoryError("CUDA out of memory"), "KV_PULL_NO_MEMORY"),
        (RuntimeError("CUDA error: an illegal memory access"), "KV_PULL_FAILED"),
    ],
)
async def test_a_device_failure_once_claimed_is_typed(peer, monkeypatch, error, reason):
    def fault(*_, **__):
        raise error

    monkeypatch.setattr(blocks, "gather", fault)
    with pytest.raises(ServiceError) as caught:
        await puller().pull(HANDOFF, PROMPT, 5)
    assert caught.value.reason == reason and peer.claims == 1


@pytest.fixture(scope="module")
async def engine(tiny_model):
    loaded = build_engine(tiny_model, engine_args("--kv-role", "decode"), model_name="test")
    loaded.engine.start(asyncio.get_running_loop())
    yield loaded
    loaded.engine.stop()


async def decode(loaded, pulled: blocks.Pulled | None):
    rid, seqs, _ = admit(request(PROMPT, temperature=0, max_tokens=2), loaded.limits)
    seqs[0].pulled = pulled
    return await collect(loaded.engine, loaded.engine.submit(rid, seqs), rid)


@pytest.mark.parametrize("fault", ["no_blocks", "no_memory"])
async def test_landing_without_room_fails_that_request_alone(engine, monkeypatch, fault):
    runner = engine.engine.runner
    data = blocks.gather(runner.kv_caches, runner.block_size, [0])
    if fault == "no_blocks":
        monkeypatch.setattr(engine.engine.scheduler.pool, "grow", lambda seq, tokens: False)
    else:
        monkeypatch.setattr(blocks, "land", lambda *_: (_ for _ in ()).throw(torch.OutOfMemoryError("no memory")))
    failed = await decode(engine, blocks.Pulled(data, runner.block_size))
    monkeypatch.undo()
    reason = ServiceError.from_status(failed.error).reason
    assert reason == {"no_blocks": "KV_HANDOFF_NO_ROOM", "no_memory": "KV_PULL_NO_MEMORY"}[fault]
    assert len((await decode(engine, None)).choices[0].token_ids) == 2  # the engine serves on
