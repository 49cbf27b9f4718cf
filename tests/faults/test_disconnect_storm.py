"""A disconnect storm: many clients start streams and vanish; the engine aborts every one and its KV cache
returns to empty, and the stack keeps serving."""

from __future__ import annotations

import socket
import time

import pytest

from devstack.stack import Stack, StackConfig
from scaleout.v1 import engine_pb2, engine_pb2_grpc
from tests.faults.conftest import post

CLIENTS = 40


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    config = StackConfig(
        port=0,
        replicas={"render": 1, "engine": 1, "derender": 1, "chat": 1},
        service_args={"engine": ["--drain-grace-s", "1"]},
        log_dir=tmp_path_factory.mktemp("storm-logs"),
    )
    with Stack(config) as running:
        yield running


def _load(stack) -> engine_pb2.GetLoadResponse:
    with stack.grpc_channel() as channel:
        return engine_pb2_grpc.EngineServiceStub(channel).GetLoad(engine_pb2.GetLoadRequest(), timeout=10)


def _start_and_vanish(stack, path: str, body: bytes) -> None:
    sock = socket.create_connection((stack.config.host, stack.port))
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
        + body
    )
    sock.recv(1)  # the stream has started
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST, not FIN
    sock.close()


def test_vanished_clients_free_the_engine(stack):
    raw = b'{"token_ids":[1,2,3],"sampling_params":{"max_tokens":3000,"ignore_eos":true}}'
    chat = b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":3000,"ignore_eos":true,"stream":true}'
    for i in range(CLIENTS):
        _start_and_vanish(
            stack, "/inference/v1/generate/stream" if i % 2 else "/v1/chat/completions", raw if i % 2 else chat
        )
    deadline = time.monotonic() + 30
    while (load := _load(stack)).running or load.waiting or load.kv_blocks_used:
        assert time.monotonic() < deadline, f"still busy after the storm: {load}"
        time.sleep(0.5)
    answer = post(stack, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert answer.status_code == 200, answer.text
