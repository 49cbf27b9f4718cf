"""A small HTTP/1.1 server for the HTTP face (render_svc/http_face.py): asyncio.Protocol over httptools (llhttp).

Why not uvicorn: for a short render (~0.3 ms) its ASGI machinery cost as much again (a task, a scope, two events
and two `write`s, a keep-alive timer per request). Here a request is parsed into one `Request`, the handler
answers it on the spot (or returns a coroutine for work that leaves the loop: the face's large and templated
renders), and the response goes out in one `write`.

HTTP kept: keep-alive (HTTP/1.1 by default, `Connection: close` honoured, HTTP/1.0 closes unless keep-alive),
pipelining (requests answered in order, one at a time per connection; reading pauses while PIPELINE_MAX wait),
chunked and `Expect: 100-continue` bodies, percent-decoded paths, a body limit (413 from the handler's
`too_large`, then the connection closes), 400 and close on bytes that are not HTTP, HEAD without a body,
back-pressure from a client that stops reading, an idle connection closed after `idle_s`, and a graceful close
(in-flight requests finish).
"""

from __future__ import annotations

import asyncio
import collections
import http
import urllib.parse
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol, cast

import httptools

Response = tuple[int, list[tuple[bytes, bytes]], bytes]  # status, headers (lower-case names), body
PIPELINE_MAX = 16
_REASONS = {status.value: status.phrase.encode() for status in http.HTTPStatus}


@dataclass(slots=True)
class Request:
    method: str
    path: str
    headers: list[tuple[bytes, bytes]]  # names lower-cased, in order
    body: bytes
    keep_alive: bool
    query: str = ""  # what follows "?", as sent


class Handler(Protocol):
    """What the server calls: `answer` gives a Response, or an awaitable of one (work off the loop);
    `refuse(reason)` the Response for a request the server refuses itself ("too_large" or "invalid")."""

    max_body_bytes: int

    def answer(self, request: Request) -> Response | Awaitable[Response]: ...

    def refuse(self, why: str, message: str) -> Response: ...


def _encode(response: Response, head_only: bool, close: bool) -> bytes:
    status, headers, body = response
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))]
    lines += [b"%s: %s\r\n" % header for header in headers]
    lines.append(b"content-length: %d\r\n%s\r\n" % (len(body), b"connection: close\r\n" if close else b""))
    return b"".join(lines) if head_only else b"".join(lines) + body


class _Connection(asyncio.Protocol):
    def __init__(self, server: HttpServer):
        self.server, self.handler = server, server.handler
        self.parser = httptools.HttpRequestParser(self)
        self.queue: collections.deque[Request] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.busy = self.closing = self.write_paused = self.read_paused = False
        self._refusal: Response | None = None  # the answer to what _refuse queued
        self.last = 0.0  # loop time of the last byte in or answer out, for the idle timeout
        self._url, self._headers, self._body, self._size = b"", [], [], 0

    # -- the connection --------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream server's transports are read-write
        self.server.connections.add(self)
        self.last = self.server.loop.time()
        self.server.loop.call_later(self.server.idle_s, self._idle_check)

    def connection_lost(self, exc) -> None:
        self.closing = True
        self.queue.clear()
        self.server.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.last = self.server.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse("invalid", "protocol upgrades are not served")
        except httptools.HttpParserError as error:
            self._refuse("invalid", f"invalid HTTP: {error}")

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._next()

    def _idle_check(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        left = self.last + self.server.idle_s - self.server.loop.time()
        if left <= 0 and not self.busy and not self.queue:
            self.transport.close()
        else:
            self.server.loop.call_later(max(left, 1.0), self._idle_check)

    def shutdown(self) -> None:
        """Close once what was asked is answered (now, when nothing is)."""
        self.closing = True
        if not self.busy and not self.queue and self.transport is not None:
            self.transport.close()

    # -- httptools' callbacks --------------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._url, self._headers, self._body, self._size = b"", [], [], 0

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        # not while an earlier answer is due: it would come first (a client waiting for 100 sends after ~1 s)
        idle = not self.busy and not self.queue
        expects = (b"expect", b"100-continue") in self._headers and self.parser.get_http_version() == "1.1"
        if idle and expects and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self.handler.max_body_bytes:
            raise httptools.HttpParserCallbackError("too large")  # stops the parser; answered in _too_large
        self._body.append(body)

    def on_message_complete(self) -> None:
        raw, _, query = self._url.partition(b"?")
        path = raw.decode("latin-1")
        if "%" in path:  # as ASGI servers give it: percent-decoded
            path = urllib.parse.unquote(path)
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        method = self.parser.get_method().decode("latin-1")
        keep_alive = self.parser.should_keep_alive()
        self.queue.append(Request(method, path, self._headers, body, keep_alive, query.decode("latin-1")))
        if len(self.queue) >= PIPELINE_MAX and not self.read_paused and self.transport is not None:
            self.read_paused = True
            self.transport.pause_reading()
        self._next()

    # -- answering -------------------------------------------------------------------------------------------
    def _refuse(self, why: str, message: str) -> None:
        """Answer the requests before this one, then this refusal, then close: the stream cannot be read on."""
        if self._size > self.handler.max_body_bytes:
            why, message = "too_large", f"the body is larger than {self.handler.max_body_bytes} bytes"
        self.closing = True
        self.queue.append(Request("", "", [], b"", False))
        self._refusal = self.handler.refuse(why, message)
        self._next()

    def _next(self) -> None:
        while self.queue and not self.busy and not self.write_paused and self.transport is not None:
            request = self.queue.popleft()
            if not request.method and self._refusal is not None:  # the refusal _refuse queued
                self._send(request, self._refusal)
                continue
            answer = self.handler.answer(request)
            if isinstance(answer, tuple):
                self._send(request, answer)
            else:
                self.busy = True
                self.server.loop.create_task(self._later(request, answer))
        if self.read_paused and len(self.queue) < PIPELINE_MAX // 2 and not self.closing and self.transport is not None:
            self.read_paused = False
            self.transport.resume_reading()

    async def _later(self, request: Request, answer: Awaitable[Response]) -> None:
        try:
            response = await answer
        finally:
            self.busy = False
        self._send(request, response)
        self._next()

    def _send(self, request: Request, response: Response) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        close = not request.keep_alive or (self.closing and not self.queue)
        transport.write(_encode(response, request.method == "HEAD", close))
        self.last = self.server.loop.time()
        if close:
            self.queue.clear()
            transport.close()


class HttpServer:
    """Serves `handler` on `sock` (bound, not listening) in the running loop."""

    def __init__(self, handler: Handler, sock, idle_s: float, grace_s: float):
        self.handler, self.socket, self.idle_s, self.grace_s = handler, sock, idle_s, grace_s
        self.connections: set[_Connection] = set()
        self.loop = asyncio.get_running_loop()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await self.loop.create_server(lambda: _Connection(self), sock=self.socket, backlog=1024)

    async def close(self) -> None:
        """Stop listening, let in-flight requests finish (up to grace_s), then close every connection."""
        if self._server is None:
            return
        self._server.close()
        for connection in list(self.connections):
            connection.shutdown()
        deadline = self.loop.time() + self.grace_s
        while self.connections and self.loop.time() < deadline:
            await asyncio.sleep(0.05)
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.abort()
        await self._server.wait_closed()
