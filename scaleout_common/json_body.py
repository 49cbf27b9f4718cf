"""A client's raw JSON body (routes that take google.api.HttpBody), read once the same way everywhere.

Only a JSON object with finite numbers is accepted: `NaN`, `Infinity` and numbers that overflow to infinity
(`1e999`) are refused, as is anything that is not JSON (INVALID_JSON, the reason the gateway gives for a body
the transcoder cannot parse).
"""

from __future__ import annotations

import json
import math

from scaleout_common.reasons import Reason, fail


def load_object(body: bytes) -> dict:
    try:
        data = json.loads(body or b"{}", parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError) as error:
        raise fail(Reason.INVALID_JSON, f"the body is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise fail(Reason.INVALID_JSON, "the body must be a JSON object")
    return data


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range for a number")
    return value
