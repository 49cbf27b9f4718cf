"""Who is calling: the client name the gateway derived from the caller's API key, and whether it is an admin.

With API keys on (gateway/edge.py), the gateway drops whatever a client sent in these headers and sets
`x-scaleout-client` (and `x-scaleout-admin: true` for an admin key) from the key it checked; with mTLS on,
only the gateway and the one-hop service can reach a service at all, so the headers are the gateway's.
Without API keys there is no identity: every caller is `Caller(None, trusted=True)` (a loopback or private
deployment), as before. So behind a gateway with keys a service runs with `--require-identity`: a call without
the gateway's header (one that reached the service some other way) is refused, never trusted as an admin's.

Scoped operations ask `caller(context)`: the engine lets a keyed caller abort only its own requests and
refuses it GetLoad and a priority above its allowance, unless its key is an admin key.

The one-hop service calls the other services through the gateway on its caller's behalf:
`remember_credentials` (called by every servicer wrapper, scaleout_common.interceptors) keeps the caller's key
for the call, and `credentials_forwarders()` (client interceptors on every channel, scaleout_common.channels)
send it on, so the gateway sees the caller's own key on those calls too.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from scaleout_common.reasons import Reason, fail

CLIENT_HEADER = "x-scaleout-client"
ADMIN_HEADER = "x-scaleout-admin"
# The metadata that carries a caller's key (OpenAI SDKs and gRPC clients send the first, Anthropic's the second).
CREDENTIAL_HEADERS = ("authorization", "x-api-key")
# Set by the engine on Abort's answer: how many ids that replica aborted (the gateway tries the next while 0).
ABORTED_HEADER = "x-scaleout-aborted"
# Priorities a keyed, non-admin caller may ask for: lower runs first, so the default 0 is the best it gets.
MIN_PRIORITY = 0

_credentials: contextvars.ContextVar[tuple[tuple[str, str], ...]] = contextvars.ContextVar(
    "scaleout_credentials", default=()
)


@dataclass(frozen=True)
class Caller:
    client: str | None  # None: no API keys in front of this service
    admin: bool = False

    @property
    def trusted(self) -> bool:
        """May act on anyone's requests: an admin key, or no keys at all."""
        return self.admin or self.client is None

    def owns(self, owner: str | None) -> bool:
        return self.trusted or owner == self.client

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """This identity as the headers the gateway sets, for a call the one-hop service makes straight to a
        replica on its caller's behalf (pipeline_svc/fleet.py): the replica scopes it as the gateway's call."""
        if self.client is None:
            return ()
        return ((CLIENT_HEADER, self.client), *(((ADMIN_HEADER, "true"),) if self.admin else ()))


def caller(context) -> Caller:
    metadata = dict(context.invocation_metadata() or ())
    client = metadata.get(CLIENT_HEADER) or None
    return Caller(client, admin=client is not None and metadata.get(ADMIN_HEADER) == "true")


def require_trusted(caller: Caller, what: str) -> None:
    """Admin-scoped operations (the scheduler's load, control operations): an admin key, or no keys at all."""
    if not caller.trusted:
        raise fail(Reason.NOT_PERMITTED, f"{what} needs an admin key")


_forwarding = False
_required = False


def configure_required(enabled: bool) -> None:
    """Whether every call must carry the gateway's identity (--require-identity)."""
    global _required
    _required = enabled


def admit(context) -> None:
    """Every call a servicer serves passes here: refused without an identity when one is required, and its
    caller's key kept for the calls it makes (`remember_credentials`)."""
    if _required and not caller(context).client:
        raise fail(Reason.IDENTITY_REQUIRED, "this service takes calls from the gateway only, with an API key")
    remember_credentials(context)


def configure_forwarding(enabled: bool) -> None:
    """Whether this process passes its callers' keys on (--forward-credentials: the one-hop service behind keys).

    Off, nothing is remembered and no interceptor is installed on channels: it costs nothing."""
    global _forwarding
    _forwarding = enabled


def forwarding() -> bool:
    return _forwarding


def remember_credentials(context) -> None:
    """Keep the caller's key for the calls this call makes (its own task's context: gone when it ends)."""
    if not _forwarding:
        return
    metadata = context.invocation_metadata() or ()
    _credentials.set(tuple((k, v) for k, v in metadata if k in CREDENTIAL_HEADERS))


def _with_credentials(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    kept = _credentials.get()
    if not kept:
        return details
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    for key, value in kept:
        if key not in metadata:
            metadata.add(key, value)
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


class _Forward:
    async def intercept_unary_unary(self, continuation, details, request):
        return await continuation(_with_credentials(details), request)

    async def intercept_unary_stream(self, continuation, details, request):
        return await continuation(_with_credentials(details), request)

    async def intercept_stream_unary(self, continuation, details, request_iterator):
        return await continuation(_with_credentials(details), request_iterator)

    async def intercept_stream_stream(self, continuation, details, request_iterator):
        return await continuation(_with_credentials(details), request_iterator)


class _UnaryUnary(_Forward, grpc.aio.UnaryUnaryClientInterceptor):
    pass


class _UnaryStream(_Forward, grpc.aio.UnaryStreamClientInterceptor):
    pass


class _StreamUnary(_Forward, grpc.aio.StreamUnaryClientInterceptor):
    pass


class _StreamStream(_Forward, grpc.aio.StreamStreamClientInterceptor):
    pass


def credentials_forwarders() -> Sequence[grpc.aio.ClientInterceptor]:
    """Client interceptors that send the current caller's key on every call (all four kinds)."""
    return [_UnaryUnary(), _UnaryStream(), _StreamUnary(), _StreamStream()]
