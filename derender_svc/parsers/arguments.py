"""The one rule every tool parser follows: a call's arguments are valid JSON, or the call is not a call.

`json.dumps(..., allow_nan=False)` is the check: a value JSON cannot carry (`1e999` parses to inf, NaN) makes
the call content, as does an arguments string that is not itself JSON... which is instead kept as a JSON
string, the way vLLM's hermes parser encodes it. Arguments are re-serialised (`ensure_ascii=False`, default
separators, as vLLM's one-shot parsers do), so streamed and one-shot results are the same bytes."""

from __future__ import annotations

import json

from derender_svc.parsers.base import ToolCallDelta

_ARGUMENT_KEYS = ("arguments", "parameters")


def dumps(value) -> str | None:
    """JSON text of `value`, or None when JSON cannot represent it."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return None


def loads(text: str):
    """The JSON value of `text`, or None; the constants NaN/Infinity are refused."""
    try:
        return json.loads(text, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return None


def _refuse(name: str):
    raise ValueError(name)


def arguments_json(value) -> str | None:
    """Arguments as JSON text: objects and arrays as they are, a string holding JSON decoded first (a string
    that does not hold JSON stays a JSON string), absent arguments as {}."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        inner = loads(value) if value.strip()[:1] in ("{", "[") else None
        return dumps(inner if inner is not None else value)
    return dumps(value)


def call_from_object(obj, keyed: bool = False) -> tuple[str, str] | None:
    """(name, arguments JSON) of a `{"name": ..., "arguments"|"parameters": ...}` object, or None; `keyed`: the
    arguments key is required (an untagged `{"name": "Ada"}` is more likely data than a call)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    key = next((k for k in _ARGUMENT_KEYS if k in obj), None)
    if keyed and key is None:
        return None
    args = arguments_json(obj[key] if key else None)
    return None if args is None else (obj["name"], args)


def emit(index: int, call: tuple[str, str]) -> list[ToolCallDelta]:
    """A whole call as its two deltas: the name, then the arguments."""
    return [ToolCallDelta(index, name=call[0]), ToolCallDelta(index, arguments=call[1])]
