"""The gateway's bounds: memory (overload manager), connections, streams, bodies, headers, timeouts, rate per key.

`Limits` holds the numbers (each a flag of `python -m gateway.envoy_config` and of `scaleout-stack`);
gateway/envoy.yaml.j2 applies them. Envoy's own refusals get a reason of the contract (`REPLY_MAPPERS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scaleout_common.identity import CLIENT_HEADER
from scaleout_common.reasons import Reason

HEADER_LIMIT_LUA = Path(__file__).with_name("header_limit.lua")


@dataclass
class Limits:
    """What bounds the gateway: memory, connections, streams, bodies, headers, time, and requests per key."""

    max_heap_mb: int = 1024  # the overload manager's heap limit (keep under the container's memory limit)
    max_connections: int = 10_000  # downstream connections, all listeners together
    max_concurrent_streams: int = 256  # per HTTP/2 connection
    max_body_mb: int = 64  # REST bodies both ways: the services' --max-message-mb (render_batch answers are large)
    max_one_hop_body_mb: int = 8  # REST bodies of the one-hop JSON routes (a conversation, not a batch)
    max_request_headers_kb: int = 32  # under what the services take (gateway/header_limit.lua answers 431)
    codec_request_headers_kb: int = 128  # Envoy's codec: one HTTP/2 header field up to this resets only its stream
    max_headers_count: int = 100
    request_headers_timeout_s: int = 10  # a client trickling its headers (slowloris)
    connect_timeout_s: int = 5  # a new connection's first byte (and TLS handshake): silent sockets are closed
    connection_idle_timeout_s: int = 60  # no request in flight (HTTP/1.1 keep-alive, an idle HTTP/2 connection)
    request_timeout_s: int = 60  # a request's headers and whole body, on every route (a stalled upload)
    stream_idle_timeout_s: int = 300  # no byte either way, where a route sets none (scaled down as the heap fills)
    unary_idle_timeout_s: int = 60  # no byte either way on render's and derender's unary calls (see idle_roles)
    connection_buffer_kb: int = 1024
    upstream_max_requests: int = 4096  # per cluster: requests, pending requests and connections in flight
    rate_limit_rps: int = 0  # per API key (0: off); needs API keys, whose client name keys the bucket
    rate_limit_burst: int = 0  # 0: twice the rate
    rate_limit_clients: int = 10_000  # distinct keys that get a bucket of their own

    client_header = CLIENT_HEADER  # the rate limit's bucket: the client name API keys give
    # Roles whose unary calls get the idle timeout: quick CPU work. The engine's and the one-hop service's unary
    # calls generate (silently, until the whole answer is ready), so only the total timeout bounds them.
    idle_roles = ("render", "derender")
    one_hop_role = "chat"  # its REST routes take max_one_hop_body_mb

    @property
    def rate_limit_bucket(self) -> int:
        return self.rate_limit_burst or 2 * self.rate_limit_rps

    def header_limit_lua(self) -> str:
        values = {
            "max_bytes": str(self.max_request_headers_kb * 1024),
            "reason": Reason.REQUEST_HEADERS_TOO_LARGE.value,
            "grpc_code": str(Reason.REQUEST_HEADERS_TOO_LARGE.code.value[0]),
        }
        text = HEADER_LIMIT_LUA.read_text()
        for name, value in values.items():
            text = text.replace("{{ " + name + " }}", value)
        return text

    @property
    def max_heap_bytes(self) -> int:
        return self.max_heap_mb * 1024 * 1024

    @property
    def max_body_bytes(self) -> int:
        return self.max_body_mb * 1024 * 1024

    @property
    def min_body_bytes(self) -> int:
        """The smallest route limit: what a body on a path no route takes may hold before its 404."""
        return min(self.max_body_bytes, self.body_bytes(self.one_hop_role))

    def body_bytes(self, role: str) -> int:
        """A REST body's limit on a role's routes (gateway/rest_routes.py)."""
        return (self.max_one_hop_body_mb if role == self.one_hop_role else self.max_body_mb) * 1024 * 1024

    @property
    def connection_buffer_bytes(self) -> int:
        return self.connection_buffer_kb * 1024

    @classmethod
    def add_arguments(cls, parser) -> None:
        """--max-heap-mb, --rate-limit-rps, ...: one flag per field."""
        for name, value in vars(cls()).items():
            parser.add_argument("--" + name.replace("_", "-"), type=int, default=value, help=f"gateway: {name}")

    @classmethod
    def from_args(cls, args) -> Limits:
        return cls(**{name: getattr(args, name) for name in vars(cls())})


def _status(code: int) -> dict:
    return {"default_value": code, "runtime_key": f"unused_reply_{code}"}


# Envoy's own answers that get a reason of their own (the rest are GATEWAY_<response flags>). Matched by
# status: Envoy's local rate limit sets no response flag on its reply (seen with 1.40), and a 429, 413 or 431
# that Envoy answers itself has one cause each.
REPLY_MAPPERS = [
    {"filter": {"status_code_filter": {"comparison": {"op": "EQ", "value": _status(code)}}}, "reason": reason}
    for code, reason in (
        (429, Reason.RATE_LIMITED),
        (413, Reason.REQUEST_BODY_TOO_LARGE),
        (431, Reason.REQUEST_HEADERS_TOO_LARGE),
        (405, Reason.METHOD_NOT_ALLOWED),
    )
]
