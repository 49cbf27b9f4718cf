"""The engine replicas one by one: a call fanned out to every replica directly, each one's answer gathered.

The one-hop service reaches the engines through the gateway, which picks one replica per call; what concerns
every replica (each one's load, a cache reset, each one's metrics) comes here instead. `--engines
host:port[,host:port...]` names them, and a host may stand for many replicas (a Kubernetes headless Service):
its addresses are resolved again on every use, so a replica that comes or goes is seen at the next call.

Each address gets a channel of its own, kept while the address resolves and closed once it is gone: mTLS as
every hop's (scaleout_common.channels), the replica's certificate checked against the host's name. A call
carries its caller's identity (scaleout_common.identity), so each replica scopes it as it would the gateway's
call. A replica that fails, or a host that does not resolve, is one answer with its error among the others:
never the whole call's failure.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from scaleout_common.channels import open_channel
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

# An answer that takes longer than this is the replica's failure (UPSTREAM_TIMEOUT), unless the call has less.
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Engines:
    """The `--engines` list: (host, port) pairs, each host one replica or a name that resolves to several."""

    hosts: tuple[tuple[str, int], ...]

    @classmethod
    def parse(cls, spec: str) -> Engines:
        hosts = []
        for item in filter(None, (part.strip() for part in spec.split(","))):
            host, sep, port = item.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"--engines: {item!r} is not host:port")
            hosts.append((host.strip("[]"), int(port)))
        return cls(tuple(hosts))


@dataclass(frozen=True)
class Replica:
    address: str  # ip:port ([ip]:port for IPv6), as it was called
    host: str  # the --engines host it was resolved from


@dataclass
class Answer:
    """One replica's answer to a fanned-out call: its response, or why it has none."""

    replica: Replica
    response: Any = None
    error: ServiceError | None = None


def _address(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ipaddress.ip_address(ip).version == 6 else f"{ip}:{port}"


class Fleet:
    def __init__(self, engines: Engines, max_message_mb: int = 64):
        self.engines = engines
        self._max_message_mb = max_message_mb
        self._channels: dict[Replica, grpc.aio.Channel] = {}
        self._stubs: dict[tuple[Replica, Callable], Any] = {}
        self._closing: set[asyncio.Task] = set()

    async def _resolve(self, host: str, port: int) -> list[Replica] | ServiceError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as error:
            return fail(Reason.UPSTREAM_UNAVAILABLE, f"engine host {host!r} does not resolve: {error}")
        ips = sorted({str(info[4][0]) for info in infos})
        # A name with IPv4 records stands for those ("localhost" answers ::1 too: the same server twice).
        v4 = [ip for ip in ips if ipaddress.ip_address(ip).version == 4]
        return [Replica(_address(ip, port), host) for ip in v4 or ips]

    async def replicas(self) -> tuple[list[Replica], list[Answer]]:
        """Every replica the hosts resolve to now, in a stable order; and an answer for each host that did not."""
        resolved = await asyncio.gather(*(self._resolve(host, port) for host, port in self.engines.hosts))
        replicas: list[Replica] = []
        unresolved: list[Answer] = []
        for (host, port), found in zip(self.engines.hosts, resolved):
            if isinstance(found, ServiceError):
                unresolved.append(Answer(Replica(f"{host}:{port}", host), error=found))
            else:
                replicas += [r for r in found if r.address not in {seen.address for seen in replicas}]
        await self._forget([r for r in self._channels if r not in replicas])
        return replicas, unresolved

    def stub(self, replica: Replica, stub_class: Callable[[grpc.aio.Channel], Any]) -> Any:
        key = (replica, stub_class)
        if key not in self._stubs:
            if replica not in self._channels:
                # The certificate names the host (an address host names itself, as gRPC would check it anyway).
                self._channels[replica] = open_channel(replica.address, self._max_message_mb, replica.host)
            self._stubs[key] = stub_class(self._channels[replica])
        return self._stubs[key]

    async def call(
        self,
        stub_class: Callable[[grpc.aio.Channel], Any],
        method: str,
        request,
        *,
        time_left: float | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> list[Answer]:
        """`method` of `stub_class` called on every replica at once, within the caller's `time_left` (seconds)
        and at most `timeout_s`; each one's answer, in the replicas' order. `request` may be a function of the
        replica's position (0, 1, ...: a weight-transfer rank each)."""
        replicas, answers = await self.replicas()
        timeout = timeout_s if time_left is None else min(time_left, timeout_s)

        async def one(position: int, replica: Replica) -> Answer:
            try:
                call = getattr(self.stub(replica, stub_class), method)
                message = request(position) if callable(request) else request
                return Answer(replica, await call(message, timeout=timeout, metadata=tuple(metadata)))
            except grpc.aio.AioRpcError as error:
                return Answer(replica, error=ServiceError.from_rpc_error(error))

        return answers + list(await asyncio.gather(*(one(i, r) for i, r in enumerate(replicas))))

    async def _forget(self, gone: list[Replica]) -> None:
        """Close the channels of replicas no longer resolved; a call still on one gets its timeout to finish."""
        for replica in gone:
            channel = self._channels.pop(replica)
            self._stubs = {key: stub for key, stub in self._stubs.items() if key[0] != replica}
            closing = asyncio.get_running_loop().create_task(channel.close(grace=DEFAULT_TIMEOUT_S))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        await self._forget(list(self._channels))
        await asyncio.gather(*self._closing)
