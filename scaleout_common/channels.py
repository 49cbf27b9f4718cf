"""Client channels to downstream services, with the same message limits and keepalive as the servers.

With --tls-dir set, a channel presents this process's certificate and follows its rotation (`RotatingChannel`):
grpcio's channel credentials cannot be reloaded, so when the files change the channel is rebuilt.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, cast

import grpc

from scaleout_common import tls
from scaleout_common.identity import credentials_forwarders, forwarding
from scaleout_common.server import channel_options
from scaleout_common.telemetry.rpc import client_interceptors
from scaleout_common.telemetry.tracing import channel_tracer

log = logging.getLogger(__name__)

# How often a call's start looks at the certificate files (three stats): a rotation is followed within this.
CHECK_S = 1.0
# Calls that started on a replaced channel finish there (a generation may run for minutes), then it closes;
# whatever is still running after this long is cancelled.
RETIRE_GRACE_S = 3600.0


def open_channel(target: str, max_message_mb: int = 64, tls_name: str | None = None) -> grpc.aio.Channel:
    """`tls_name`: the name the peer's certificate is checked against when `target` is an address (a replica
    resolved from a headless Service's name); by default the target's own host."""
    options: list[tuple[str, int | str]] = [
        *channel_options(max_message_mb),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
    ]
    if tls_name:
        options.append(("grpc.ssl_target_name_override", tls_name))
    # With tracing on, each call gets a CLIENT span and carries W3C traceparent downstream; every call carries
    # the API key of the call it is made for (scaleout_common.identity).
    interceptors = [*client_interceptors(target, channel_tracer()), *(credentials_forwarders() if forwarding() else ())]
    credentials = tls.current()  # mTLS between the hops when --tls-dir is set
    if credentials is not None:
        return RotatingChannel(
            lambda secure: grpc.aio.secure_channel(target, secure, options=options, interceptors=interceptors),
            credentials,
        )
    return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)


class RotatingChannel(grpc.aio.Channel):
    """A TLS channel that follows its certificate files.

    Stubs hold its multicallables, which resolve on the current channel at each call. A call that starts
    `CHECK_S` or more after the last look checks the files; when they changed, it and every later call go over
    a fresh channel made from them, while calls in flight finish on the old one (closed once they end).
    """

    def __init__(self, open_secure: Callable[[grpc.ChannelCredentials], grpc.aio.Channel], files: tls.Credentials):
        self._open = open_secure
        self._files = files
        self._version, credentials = files.channel()
        self._channel = open_secure(credentials)
        self._checked = time.monotonic()
        self._retiring: dict[asyncio.Task, grpc.aio.Channel] = {}  # replaced channels, closing once idle

    def current(self) -> grpc.aio.Channel:
        now = time.monotonic()
        if now - self._checked >= CHECK_S:
            self._checked = now
            self._follow_files()
        return self._channel

    def _follow_files(self) -> None:
        try:
            if self._files.version() == self._version:
                return
            self._version, credentials = self._files.channel()
        except OSError as error:  # a file missing in the middle of a swap: the next look takes the new ones
            log.warning("certificates in %s unreadable (%s); keeping the current channel", self._files.root, error)
            return
        retired, self._channel = self._channel, self._open(credentials)
        closing = asyncio.get_running_loop().create_task(retired.close(RETIRE_GRACE_S))
        self._retiring[closing] = retired
        closing.add_done_callback(self._retiring.pop)
        log.info("certificates in %s changed: new calls go over a fresh channel", self._files.root)

    def _follow(self, kind: str, method: str, serializer, deserializer, registered) -> Any:
        return _Following(self, kind, method, serializer, deserializer, registered)

    def unary_unary(
        self, method, request_serializer=None, response_deserializer=None, _registered_method=False
    ) -> grpc.aio.UnaryUnaryMultiCallable:
        kind = "unary_unary"
        return self._follow(kind, method, request_serializer, response_deserializer, _registered_method)

    def unary_stream(
        self, method, request_serializer=None, response_deserializer=None, _registered_method=False
    ) -> grpc.aio.UnaryStreamMultiCallable:
        kind = "unary_stream"
        return self._follow(kind, method, request_serializer, response_deserializer, _registered_method)

    def stream_unary(
        self, method, request_serializer=None, response_deserializer=None, _registered_method=False
    ) -> grpc.aio.StreamUnaryMultiCallable:
        kind = "stream_unary"
        return self._follow(kind, method, request_serializer, response_deserializer, _registered_method)

    def stream_stream(
        self, method, request_serializer=None, response_deserializer=None, _registered_method=False
    ) -> grpc.aio.StreamStreamMultiCallable:
        kind = "stream_stream"
        return self._follow(kind, method, request_serializer, response_deserializer, _registered_method)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self._channel.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        await self._channel.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self.current().channel_ready()

    async def close(self, grace: float | None = None) -> None:
        retired = list(self._retiring.values())
        for closing in list(self._retiring):
            closing.cancel()
        await asyncio.gather(*(channel.close(grace) for channel in [*retired, self._channel]))

    async def __aenter__(self) -> RotatingChannel:
        return self

    async def __aexit__(self, exc_type, exc_val, exc_tb) -> None:
        await self.close(None)


class _Following:
    """A multicallable bound to whichever channel is current when a call starts."""

    def __init__(self, owner: RotatingChannel, kind: str, method: str, serializer, deserializer, registered):
        self._owner, self._kind, self._method = owner, kind, method
        self._serializer, self._deserializer, self._registered = serializer, deserializer, registered
        self._bound: tuple[grpc.aio.Channel, Callable[..., Any]] | None = None  # (channel, its multicallable)

    def __call__(self, *args, **kwargs):
        channel = self._owner.current()
        if self._bound is None or self._bound[0] is not channel:
            make = cast(Callable[..., Any], getattr(channel, self._kind))
            self._bound = (
                channel,
                make(self._method, self._serializer, self._deserializer, _registered_method=self._registered),
            )
        return self._bound[1](*args, **kwargs)
