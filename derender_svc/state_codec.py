"""The stateless twin's opaque state: a session's state as compact JSON, bounded in size (no compression, so
the bound also holds for what a forged state can make the server parse)."""

from __future__ import annotations

import json

from scaleout_common.reasons import Reason, fail

VERSION = 1


def encode_state(state: dict, max_bytes: int) -> bytes:
    data = json.dumps({"v": VERSION, "s": state}, separators=(",", ":"), ensure_ascii=False).encode()
    if len(data) > max_bytes:
        raise fail(
            Reason.STATE_TOO_LARGE,
            f"derender state would be {len(data)} bytes (limit {max_bytes}); "
            "use the DerenderStream RPC for this request",
            "state",
        )
    return data


def decode_state(data: bytes, max_bytes: int) -> dict | None:
    """None for an empty state (the first call)."""
    if not data:
        return None
    if len(data) > max_bytes:
        raise fail(Reason.STATE_TOO_LARGE, f"derender state is {len(data)} bytes (limit {max_bytes})", "state")
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise fail(Reason.INVALID_STATE, f"state is not one this service produced: {error}", "state") from None
    if not isinstance(payload, dict) or payload.get("v") != VERSION or not isinstance(payload.get("s"), dict):
        raise fail(Reason.INVALID_STATE, "state is not one this service produced", "state")
    return payload["s"]
