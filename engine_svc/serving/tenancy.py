"""Whose request is whose: with API keys in front, request ids are scoped by tenant, a caller may abort only its
own requests, may not read the scheduler's load, and may not ask for a priority above its allowance, unless its
key is an admin key (scaleout_common.identity). Without keys every caller is trusted, as before.

Scoped ids: the engine keys a keyed caller's request as `<client>\\0<request_id>` (`engine_key`; a client name
is an HTTP header value, which never holds NUL), so another tenant's live id is neither confirmed (no
DUPLICATE_REQUEST_ID across tenants: that 409 was an existence oracle) nor blocked (both run under the same id),
and answers name the id as its caller sent it (`public_id`). An Abort reaches the caller's own requests of those
ids; an admin's (or any caller's without keys) reaches every tenant's.

Abort through the gateway may land on any engine replica: the answer's `x-scaleout-aborted` header (how many
ids this replica aborted) lets the gateway try the next replica while it is 0 (gateway/envoy.yaml.j2), so the
call reaches the replica that owns the request.
"""

from __future__ import annotations

from collections.abc import Collection

from scaleout_common.identity import ABORTED_HEADER, MIN_PRIORITY, Caller
from scaleout_common.reasons import Reason, fail

__all__ = ["ABORTED_HEADER", "abort_scope", "check_priority", "engine_key", "public_id", "reaches"]

SCOPE = "\0"  # joins a keyed client's name to its request ids


def engine_key(caller: Caller, request_id: str) -> str:
    """The engine's key for `request_id` sent by `caller`: the id itself without keys, else scoped by its client."""
    return request_id if caller.client is None else f"{caller.client}{SCOPE}{request_id}"


def public_id(key: str) -> str:
    """The request id as its caller sent it."""
    client, scoped, request_id = key.partition(SCOPE)
    return request_id if scoped else client


def abort_scope(caller: Caller, request_ids: Collection[str]) -> tuple[frozenset[str], str | None]:
    """What an Abort of `request_ids` by `caller` names: (engine keys, its client) for a keyed caller; (the ids
    themselves, None) for a trusted one, whose Abort reaches every tenant's requests of those ids."""
    if caller.trusted:
        return frozenset(request_ids), None
    return frozenset(engine_key(caller, request_id) for request_id in request_ids), caller.client


def reaches(key: str, wanted: frozenset[str], client: str | None) -> bool:
    """Whether an Abort that names `wanted` (abort_scope's, for `client`) reaches the live request `key`."""
    return key in wanted or (client is None and public_id(key) in wanted)


def check_priority(caller: Caller, request) -> None:
    if request.priority < MIN_PRIORITY and not caller.trusted:
        raise fail(
            Reason.NOT_PERMITTED,
            f"priority {request.priority} is above this key's allowance (at least {MIN_PRIORITY}; lower runs "
            "first); an admin key may set any",
            "priority",
        )
