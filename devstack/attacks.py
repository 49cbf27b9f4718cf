"""Attacks on a running stack's gateway, shared by the fault suite (tests/faults/test_tenant_isolation.py) and the
security bench (bench/security): each is one tenant trying to fail or lock out every other (issue 36).

- `long_fields`: requests whose fields are tens of thousands of characters long (errors once echoed them into
  trailers that reset the shared upstream connection).
- `StalledBodies`: uploads that send most of a large body and stop, over HTTP/1.1 and over HTTP/2 (a minimal
  client below: just enough framing to open streams and send DATA).
- `SilentSockets`: connections that never send a byte.
Each attack holds what it opened until `close()`; `held()` says how many the gateway still holds, `prune()` lets
go of the rest.
"""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import struct
import time

LONG_FIELDS = (
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "tools": "a" * 70_000}),
    ("/v1/chat/completions/render", {"messages": [{"role": "r" * 30_000, "content": "hi"}]}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "k" * 40_000: 1}),
    ("/v1/messages", {"model": "m", "max_tokens": 4, "messages": [{"role": "u" * 50_000, "content": "hi"}]}),
)
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def long_fields() -> list[tuple[str, bytes]]:
    """(path, JSON body) of each long-field request."""
    return [(path, json.dumps(body).encode()) for path, body in LONG_FIELDS]


def raise_open_files(wanted: int) -> int:
    """Raise this process's open-file limit towards `wanted` (up to the hard limit); the limit it got."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class _Held:
    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []

    def held(self) -> int:
        """How many of ours the gateway holds: neither answered (an answer, 408 or 413, ends the attack's request)
        nor closed."""
        return sum(_held(sock) for sock in self.sockets)

    def prune(self) -> int:
        """Close ours that the gateway answered or closed (a lasting attack reuses their descriptors); how many it
        still holds."""
        kept = [sock for sock in self.sockets if _held(sock)]
        for sock in set(self.sockets) - set(kept):
            sock.close()
        self.sockets = kept
        return len(kept)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()


def _held(sock: socket.socket) -> bool:
    try:
        sock.setblocking(False)
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    except OSError:
        pass
    return False


class SilentSockets(_Held):
    """`count` TCP connections to host:port that never send a byte."""

    def __init__(self, host: str, port: int, count: int) -> None:
        super().__init__()
        for _ in range(count):
            try:
                self.sockets.append(socket.create_connection((host, port), timeout=5))
            except OSError:
                break  # the listener's backlog or the cap: what got in is the attack


class StalledBodies(_Held):
    """`count` uploads of `body_mb` MiB (of a body that claims one MiB more) that stop there, each on its own
    connection, over HTTP/1.1 or HTTP/2."""

    def __init__(self, host: str, port: int, path: str, count: int, body_mb: int, http2: bool = False) -> None:
        super().__init__()
        head = b'{"messages":[{"role":"user","content":"'
        body = head + b"a" * (body_mb << 20)
        for _ in range(count):
            sock = socket.create_connection((host, port), timeout=30)
            with contextlib.suppress(OSError):  # refused mid-upload: the gateway's limits did their work
                (_h2_upload if http2 else _h1_upload)(sock, path, body, len(body) + (1 << 20))
            self.sockets.append(sock)


def _h1_upload(sock: socket.socket, path: str, body: bytes, claimed: int) -> None:
    head = (
        f"POST {path} HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: {claimed}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)


def _h2_upload(sock: socket.socket, path: str, body: bytes, claimed: int) -> None:
    """Stream 1 of a fresh HTTP/2 connection: headers, then `body` in DATA frames, never END_STREAM. Envoy's
    windows (256 MiB by default) take the body without waiting for WINDOW_UPDATEs."""
    sock.sendall(PREFACE + _frame(4, 0, 0, b""))  # our SETTINGS: the defaults
    time.sleep(0.1)  # Envoy's SETTINGS and window update arrive; the kernel buffers them for us
    headers = (
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "gateway"),
        ("content-type", "application/json"),
        ("content-length", str(claimed)),
    )
    sock.sendall(_frame(1, 0x4, 1, b"".join(_literal(name, value) for name, value in headers)))  # END_HEADERS
    for start in range(0, len(body), 16384):  # the default SETTINGS_MAX_FRAME_SIZE
        sock.sendall(_frame(0, 0, 1, body[start : start + 16384]))


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _literal(name: str, value: str) -> bytes:
    """HPACK: a literal header field without indexing, new name, no Huffman coding."""
    return b"\x00" + _hpack_int(len(name)) + name.encode() + _hpack_int(len(value)) + value.encode()


def _hpack_int(value: int, prefix: int = 7) -> bytes:
    limit = (1 << prefix) - 1
    if value < limit:
        return bytes([value])
    out, value = [limit], value - limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    return bytes([*out, value])
