"""Reading the JSON bodies of the RL faces (vllm_rl.py, sglang_rl.py): each value checked, a bad one a 400 naming its
field (INVALID_REQUEST), a field we do not take a 400 naming it (UNSUPPORTED_FIELD)."""

from __future__ import annotations

from google.api import httpbody_pb2

from scaleout_common.errors import quote
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail


def body(request: httpbody_pb2.HttpBody) -> dict:
    return load_object(request.data)


def typed(value, kind: type, field: str):
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise fail(Reason.INVALID_REQUEST, f"{field} must be a {kind.__name__}", field)
    return value


def strings(value, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(Reason.INVALID_REQUEST, f"{field} must be a list of strings", field)
    return value


def shapes(value, field: str) -> list[list[int]]:
    if not isinstance(value, list) or not all(
        isinstance(s, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in s) for s in value
    ):
        raise fail(Reason.INVALID_REQUEST, f"{field} must be a list of lists of integers", field)
    return value


def only(body: dict, keys, where: str = "") -> None:
    if unknown := sorted(set(body) - set(keys)):
        name = f"{where}.{unknown[0]}" if where else unknown[0]
        raise fail(Reason.UNSUPPORTED_FIELD, f"{quote(name)} is not supported", name)
