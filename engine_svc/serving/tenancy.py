"""Whose request is whose: with API keys in front, a caller may abort only its own requests, may not read the
scheduler's load, and may not ask for a priority above its allowance, unless its key is an admin key
(scaleout_common.identity). Without keys every caller is trusted, as before.

Abort through the gateway may land on any engine replica: the answer's `x-scaleout-aborted` header (how many
ids this replica aborted) lets the gateway try the next replica while it is 0 (gateway/envoy.yaml.j2), so the
call reaches the replica that owns the request.
"""

from __future__ import annotations

from scaleout_common.identity import ABORTED_HEADER, MIN_PRIORITY, Caller, require_trusted
from scaleout_common.reasons import Reason, fail

__all__ = ["ABORTED_HEADER", "Owners", "require_trusted"]


class Owners:
    """request id -> the client that submitted it, for requests in flight from keyed callers."""

    def __init__(self) -> None:
        self._by_id: dict[str, str] = {}

    def admit(self, caller: Caller, request) -> None:
        if request.priority < MIN_PRIORITY and not caller.trusted:
            raise fail(
                Reason.NOT_PERMITTED,
                f"priority {request.priority} is above this key's allowance (at least {MIN_PRIORITY}; lower runs "
                "first); an admin key may set any",
                "priority",
            )

    def add(self, request_id: str, caller: Caller) -> None:
        if caller.client is not None:
            self._by_id[request_id] = caller.client

    def remove(self, request_id: str) -> None:
        self._by_id.pop(request_id, None)

    def split(self, caller: Caller, request_ids: list[str]) -> tuple[list[str], list[str]]:
        """(ids the caller may abort, ids it may not: answered as not found, never confirmed to exist)."""
        if caller.trusted:
            return request_ids, []
        mine = [i for i in request_ids if self._by_id.get(i) == caller.client]
        return mine, [i for i in request_ids if self._by_id.get(i) != caller.client]
