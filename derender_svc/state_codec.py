"""The stateless twin's opaque state: a session's state as compressed JSON, bounded in size."""

from __future__ import annotations

import json
import zlib

from scaleout_common.errors import invalid_argument, out_of_range

VERSION = 1


def encode_state(state: dict, max_bytes: int) -> bytes:
    data = zlib.compress(json.dumps({"v": VERSION, "s": state}, separators=(",", ":")).encode(), 1)
    if len(data) > max_bytes:
        raise out_of_range("STATE_TOO_LARGE", f"derender state would be {len(data)} bytes (limit {max_bytes}); "
                           "use the DerenderStream RPC for this request", "state")
    return data


def decode_state(data: bytes, max_bytes: int) -> dict | None:
    """None for an empty state (the first call)."""
    if not data:
        return None
    if len(data) > max_bytes:
        raise out_of_range("STATE_TOO_LARGE", f"derender state is {len(data)} bytes (limit {max_bytes})", "state")
    try:
        payload = json.loads(zlib.decompress(data, bufsize=max_bytes))
    except (zlib.error, ValueError) as error:
        raise invalid_argument("INVALID_STATE", f"state is not one this service produced: {error}", "state")
    if not isinstance(payload, dict) or payload.get("v") != VERSION or not isinstance(payload.get("s"), dict):
        raise invalid_argument("INVALID_STATE", "state is not one this service produced", "state")
    return payload["s"]
