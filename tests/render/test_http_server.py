"""render_svc/http_server.py, the HTTP/1.1 server under render's HTTP face, over raw sockets with a stub handler
(no model): keep-alive, pipelining in order (answers on the spot and from awaitables), Connection: close and
HTTP/1.0, chunked bodies, Expect: 100-continue, HEAD, percent-decoded paths, the body limit and bytes that are not HTTP (the handler's
refusal, then close), and a graceful close that lets an in-flight request finish."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from render_svc.http_face import HttpFace
from render_svc.http_server import HttpServer, Request
from scaleout_common.reasons import Reason
from tests.gateway.rest import detail_reason


class Stub:
    """Echoes method, path and body; `/slow` answers from an awaitable that waits for `release`."""

    max_body_bytes = 64

    def __init__(self):
        self.release = asyncio.Event()

    def answer(self, request: Request):
        body = json.dumps({"method": request.method, "path": request.path, "body": request.body.decode()}).encode()
        if request.path != "/slow":
            return 200, [(b"content-type", b"application/json")], body

        async def later():
            await self.release.wait()
            return 200, [], body

        return later()

    def refuse(self, why: str, message: str):
        return (413 if why == "too_large" else 400), [], json.dumps({"why": why}).encode()


@pytest.fixture
async def served():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    stub = Stub()
    server = HttpServer(stub, sock, idle_s=30, grace_s=5)
    await server.start()
    yield server, stub, sock.getsockname()[1]
    stub.release.set()
    await server.close()


async def _read(reader: asyncio.StreamReader) -> tuple[int, dict, bytes]:
    """One response: status, headers, body."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in head[1:] if line)
    body = await reader.readexactly(int(headers.get("content-length", 0)))
    return int(head[0].split()[1]), headers, body


def _post(path: str, body: bytes = b"", extra: str = "") -> bytes:
    return f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n{extra}\r\n".encode() + body


async def test_keep_alive_and_pipelining_answer_in_order(served):
    _, stub, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post("/a", b"1") + _post("/slow", b"2") + _post("/b?x=1", b"3"))
    await asyncio.sleep(0.05)
    status, headers, body = await _read(reader)
    assert status == 200 and json.loads(body) == {"method": "POST", "path": "/a", "body": "1"}
    assert headers["content-type"] == "application/json" and "connection" not in headers
    stub.release.set()  # /b waits for /slow, its answer comes second
    assert [json.loads((await _read(reader))[2])["path"] for _ in range(2)] == ["/slow", "/b"]
    writer.write(_post("/c", b"4"))  # the connection is still open
    assert json.loads((await _read(reader))[2])["body"] == "4"
    writer.close()


@pytest.mark.parametrize(
    "request_bytes",
    [_post("/a", b"x", "connection: close\r\n"), b"GET /a HTTP/1.0\r\n\r\n"],
    ids=["connection-close", "http-1.0"],
)
async def test_a_request_that_ends_the_connection_closes_it(served, request_bytes):
    reader, writer = await asyncio.open_connection("127.0.0.1", served[2])
    writer.write(request_bytes)
    status, headers, _ = await _read(reader)
    assert status == 200 and headers["connection"] == "close"
    assert await reader.read() == b""  # closed by the server
    writer.close()


async def test_chunked_expect_continue_and_head(served):
    reader, writer = await asyncio.open_connection("127.0.0.1", served[2])
    chunked = "POST /c HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nexpect: 100-continue\r\n\r\n"
    writer.write(chunked.encode())
    assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
    assert json.loads((await _read(reader))[2])["body"] == "abcde"
    writer.write(b"HEAD /h HTTP/1.1\r\nhost: x\r\n\r\n" + _post("/aft%65r"))  # percent-decoded
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and b"content-length: " in head  # no body follows
    assert json.loads((await _read(reader))[2])["path"] == "/after"
    writer.close()


@pytest.mark.parametrize(
    ("request_bytes", "status", "why"),
    [(_post("/a", b"x" * 65), 413, "too_large"), (b"NOT HTTP AT ALL\r\n\r\n", 400, "invalid")],
    ids=["body-over-the-limit", "not-http"],
)
async def test_refusals_answer_what_came_before_then_close(served, request_bytes, status, why):
    reader, writer = await asyncio.open_connection("127.0.0.1", served[2])
    writer.write(_post("/first") + request_bytes + _post("/never"))
    assert json.loads((await _read(reader))[2])["path"] == "/first"
    refused, headers, body = await _read(reader)
    assert (refused, json.loads(body), headers["connection"]) == (status, {"why": why}, "close")
    assert await reader.read() == b""
    writer.close()


async def test_close_lets_the_request_in_flight_finish(served):
    server, stub, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post("/slow", b"s"))
    await asyncio.sleep(0.05)
    closing = asyncio.create_task(server.close())
    assert await idle_reader.read() == b""  # an idle connection closes at once
    stub.release.set()
    status, headers, body = await _read(reader)
    assert status == 200 and headers["connection"] == "close" and json.loads(body)["body"] == "s"
    await closing
    writer.close()
    idle_writer.close()


def test_the_faces_refusals_are_the_gateways_error_shapes():
    face = HttpFace(None, 64, lambda: True)
    status, _, body = face.refuse("too_large", "the body is larger than 64 bytes")
    error = json.loads(body)["error"]
    assert status == error["code"] == 413 and detail_reason(error) == Reason.REQUEST_BODY_TOO_LARGE and error["type"]
    status, _, body = face.refuse("invalid", "invalid HTTP: x")
    assert status == 400 and detail_reason(json.loads(body)["error"]) == Reason.INVALID_HTTP
