"""Client channels to downstream services, with the same message limits and keepalive as the servers."""

from __future__ import annotations

import grpc

from scaleout_common import tls
from scaleout_common.identity import credentials_forwarders, forwarding
from scaleout_common.server import channel_options
from scaleout_common.telemetry.rpc import client_interceptors
from scaleout_common.telemetry.tracing import channel_tracer


def open_channel(target: str, max_message_mb: int = 64) -> grpc.aio.Channel:
    options = channel_options(max_message_mb) + [
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
    ]
    # With tracing on, each call gets a CLIENT span and carries W3C traceparent downstream; every call carries
    # the API key of the call it is made for (scaleout_common.identity).
    interceptors = [*client_interceptors(target, channel_tracer()), *(credentials_forwarders() if forwarding() else ())]
    credentials = tls.current()  # mTLS between the hops when --tls-dir is set
    if credentials is not None:
        return grpc.aio.secure_channel(target, credentials.channel(), options=options, interceptors=interceptors)
    return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)
