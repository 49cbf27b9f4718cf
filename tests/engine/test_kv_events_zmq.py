"""vLLM's ZMQ KV-event face, decoded by vLLM's own classes (vLLM 0.33's `vllm.distributed.kv_events`, in a
subprocess): the PUB stream, the ROUTER replay from 0, and a
table rebuilt from the replayed events that equals the engine's prefix table."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import subprocess
import sys

import msgspec
import zmq
import zmq.asyncio

from scaleout.v1 import control_pb2, control_pb2_grpc, kv_events_pb2
from scaleout_common import prefix_hash
from tests.engine.conftest import engine_stub
from tests.engine.test_kv_events import _pool_of, _traffic

VLLM_PYTHON = sys.executable  # make setup installs vLLM 0.33 (without its pins) beside us
# Imports vLLM's classes first (the slow part, overlapping the engine's run), then decodes the frames it is sent.
DECODER = """
import json, sys, msgspec
from vllm.distributed.kv_events import KVEventBatch
print("ready", flush=True)
decode = msgspec.msgpack.Decoder(type=KVEventBatch).decode
out = []
for seq, payload in msgspec.msgpack.decode(open(sys.stdin.readline().strip(), "rb").read()):
    batch = decode(payload)
    out.append([seq, batch.data_parallel_rank, [
        [type(e).__name__, [h.hex() for h in getattr(e, "block_hashes", [])],
         e.parent_block_hash.hex() if getattr(e, "parent_block_hash", None) else None,
         list(getattr(e, "token_ids", [])), getattr(e, "block_size", None), getattr(e, "extra_keys", None),
         getattr(e, "medium", None)] for e in batch.events]])
print(json.dumps(out), flush=True)
"""


def _free_port() -> int:
    """A free port below Linux's ephemeral range (32768+), so no port-0 bind elsewhere can take it before the engine."""
    while True:
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", random.randrange(20_000, 32_000)))
            except OSError:
                continue
            return s.getsockname()[1]


async def _drain(sub: zmq.asyncio.Socket, quiet_s: float = 0.5) -> list[list[bytes]]:
    frames = []
    while await sub.poll(quiet_s * 1000):
        frames.append(await sub.recv_multipart())
    return frames


async def _replay(ctx: zmq.asyncio.Context, endpoint: str, start: int) -> list[list[bytes]]:
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(endpoint)
    await dealer.send_multipart([b"", start.to_bytes(8, "big")])
    frames = []
    async with asyncio.timeout(10):
        while True:
            _, topic, seq, payload = await dealer.recv_multipart()
            if seq == (-1).to_bytes(8, "big", signed=True):
                break
            frames.append([topic, seq, payload])
    dealer.close(linger=0)
    return frames


async def decode(decoder: subprocess.Popen, tmp_path, frames: list[list[bytes]]):
    """What a DECODER subprocess (ready once vLLM is imported) prints for replayed frames, given as a file."""
    path = tmp_path / "frames.msgpack"
    path.write_bytes(msgspec.msgpack.encode([[int.from_bytes(f[1], "big"), f[2]] for f in frames]))
    assert decoder.stdout is not None and decoder.stdin is not None
    assert (await asyncio.to_thread(decoder.stdout.readline)).strip() == "ready"
    decoder.stdin.write(f"{path}\n")
    decoder.stdin.flush()
    return json.loads(await asyncio.to_thread(decoder.stdout.readline))


async def test_vllms_classes_decode_the_stream_and_the_replay(tiny_model, tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "0")  # whole hashes, to re-derive them below
    decoder = subprocess.Popen(
        [VLLM_PYTHON, "-c", DECODER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    pub, replay = _free_port(), _free_port()
    config = {"enable_kv_cache_events": True, "endpoint": f"tcp://*:{pub}", "replay_endpoint": f"tcp://*:{replay}"}
    config["topic"] = "kv@test"
    flags = ("--block-size", "4", "--num-kv-blocks", "40", "--kv-events-config", json.dumps(config))
    ctx = zmq.asyncio.Context()
    try:
        async with engine_stub(tiny_model, *flags) as (stub, service):
            sub = ctx.socket(zmq.SUB)
            sub.setsockopt(zmq.SUBSCRIBE, b"kv@test")
            sub.connect(f"tcp://127.0.0.1:{pub}")
            await asyncio.sleep(0.5)  # ZMQ's slow joiner: batches before the connection are the replay's
            await _traffic(stub, 25, seed=5)
            await control_pb2_grpc.EngineControlServiceStub(stub.channel).ResetPrefixCache(
                control_pb2.ResetPrefixCacheRequest()
            )
            await _traffic(stub, 25, seed=6)
            live = await _drain(sub)
            control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
            source = (await control.GetKvEventSources(kv_events_pb2.GetKvEventSourcesRequest())).source
            replayed = await _replay(ctx, f"tcp://127.0.0.1:{replay}", 0)
            table = set(_pool_of(service).table)
            sub.close(linger=0)
        assert source.endpoint == f"tcp://*:{pub}" and source.replay_endpoint == f"tcp://*:{replay}"
        assert source.enable_kv_cache_events and source.publisher == "zmq" and source.buffer_steps == 10_000
        assert live and all(len(f) == 3 and f[0] == b"kv@test" for f in live)
        assert replayed[-len(live) :] == live  # the replay buffer holds the very frames published
        seqs = [int.from_bytes(f[1], "big") for f in replayed]
        assert seqs == list(range(len(seqs)))  # from 0, without gaps
        decoded = await decode(decoder, tmp_path, replayed)
    finally:
        decoder.kill()
        ctx.term()
    assert [s for s, _, _ in decoded] == seqs and {rank for _, rank, _ in decoded} == {0}
    assert decoded[0][2] == [["AllBlocksCleared", [], None, [], None, None, None]]  # batch 0: a fresh engine
    kinds = [e[0] for _, _, events in decoded for e in events]
    assert kinds.count("AllBlocksCleared") == 2 and {"BlockStored", "BlockRemoved"} <= set(kinds)
    rebuilt: dict[str, tuple] = {}
    for _, _, events in decoded:
        for kind, hashes, parent, tokens, size, extra_keys, medium in events:
            if kind == "AllBlocksCleared":
                rebuilt.clear()
                continue
            assert medium == "GPU"
            if kind == "BlockRemoved":
                for h in hashes:
                    rebuilt.pop(h)
                continue
            assert size == 4 and len(tokens) == 4 * len(hashes) and len(extra_keys) == len(hashes)
            salt = extra_keys[0][0] if extra_keys[0] else ""
            previous = bytes.fromhex(parent) if parent else prefix_hash.root(salt)
            for i, h in enumerate(hashes):  # the hashes follow from the token ids (docs/engine.md)
                previous = prefix_hash.block_hash(previous, tokens[4 * i : 4 * i + 4])
                assert previous.hex() == h
                rebuilt[h] = tuple(tokens[4 * i : 4 * i + 4])
    assert {bytes.fromhex(h) for h in rebuilt} == table
