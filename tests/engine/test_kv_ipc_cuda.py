"""The KV handoff's device path on one GPU (skipped without CUDA): a prefill engine and a decode engine in two
processes (the tiny model of the engine tests, its weights scaled so greedy tokens depend on the K/V), the
decode engine maps the prefill engine's cache once (ShareKvCache) and copies each handoff's blocks device to
device; it decodes exactly what it decodes alone, computes none of the prompt, says it went by cuda_ipc, and the
prefill engine frees the blocks."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
import torch

from scaleout.v1 import engine_pb2, engine_pb2_grpc, kv_transfer_pb2
from tests.engine.conftest import request

pytestmark = [
    pytest.mark.slow,  # two engine processes on the GPU
    pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA IPC needs a CUDA device"),
]

SERVER = """
import functools, sys
from engine_svc.__main__ import make_parser
from engine_svc.serving.loader import build_engine
from engine_svc.serving.service import EngineService
from scaleout_common.server import run
from tests.engine.conftest import tiny_llama

def build(args):
    return build_engine(tiny_llama().to(args.device), args, model_name="test")

args = make_parser().parse_args(sys.argv[1:])
run(EngineService(args, build=functools.partial(build, args)), args)
"""
FLAGS = ["--device", "cuda", "--engine-core", "thread", "--metrics-port", "-1", "--host", "127.0.0.1"]
FLAGS += ["--kv-cache-memory-fraction", "0.05", "--drain-delay-s", "0"]
PROMPTS = [[1] + [(7 * j + k) % 150 + 5 for j in range(36 + 20 * k)] for k in range(3)]  # 2 to 5 blocks


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(log: Path, size: int = 3000) -> str:
    return log.read_text()[-size:]


@contextlib.asynccontextmanager
async def _engine(role: str, log: Path):
    port = _free_port()
    argv = [sys.executable, "-c", SERVER, *FLAGS, "--port", str(port), "--kv-role", role]
    with log.open("w") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=Path(__file__).parents[2])
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = engine_pb2_grpc.EngineServiceStub(channel)
            deadline = time.monotonic() + 240
            while True:
                assert process.poll() is None, _tail(log)
                assert time.monotonic() < deadline, "the engine did not come up"
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await stub.GetModelInfo(engine_pb2.GetModelInfoRequest(), timeout=2)
                    break
                await asyncio.sleep(0.5)
            yield stub
    finally:
        process.terminate()
        process.wait(30)


def _step(prompt, max_tokens, **transfer) -> engine_pb2.GenerateRequest:
    message = request(prompt, temperature=0, max_tokens=max_tokens, ignore_eos=True)
    if transfer:
        message.kv_transfer.CopyFrom(kv_transfer_pb2.KvTransfer(**transfer))
    return message


async def test_decode_over_cuda_ipc_matches_the_engine_alone(tmp_path):
    logs = tmp_path / "prefill.log", tmp_path / "decode.log"
    async with _engine("prefill", logs[0]) as prefill, _engine("decode", logs[1]) as decode:
        for prompt in PROMPTS:
            alone = (await decode.GenerateUnary(_step(prompt, 12))).choices[0].token_ids
            handoff = (await prefill.GenerateUnary(_step(prompt, 1, hand_off=True))).kv_handoff
            before = await decode.GetLoad(engine_pb2.GetLoadRequest())
            pulled = await decode.GenerateUnary(_step(prompt, 12, pull=handoff))
            after = await decode.GetLoad(engine_pb2.GetLoadRequest())
            assert list(pulled.choices[0].token_ids) == list(alone) and pulled.prompt.kv_transport == "cuda_ipc"
            assert after.prompt_tokens_computed == before.prompt_tokens_computed
            assert after.prompt_tokens_transferred - before.prompt_tokens_transferred == len(prompt)
        for _ in range(50):  # the prefill engine frees each handoff's blocks once the decode engine copied them
            if (await prefill.GetLoad(engine_pb2.GetLoadRequest())).kv_blocks_used == 0:
                break
            await asyncio.sleep(0.05)
        assert (await prefill.GetLoad(engine_pb2.GetLoadRequest())).kv_blocks_used == 0
    text = _tail(logs[1], 1 << 20)
    assert text.count("via cuda_ipc") == len(PROMPTS) and "via grpc_stream" not in text, text[-3000:]
