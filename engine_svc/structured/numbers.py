"""Integer and number nodes xgrammar enforces in full: bounds made whole and clamped to int64, a whole
`multipleOf` only between two bounds, and a fractional one held to the integers that pass validators' check."""

from __future__ import annotations

import math
from fractions import Fraction

from engine_svc.structured.backend import GrammarError

INT64 = (1 << 63) - 1


def integer_node(alt: dict, path: str) -> dict | None:
    low, high = -INT64, INT64
    for key, value in alt.items():
        if key in ("minimum", "exclusiveMinimum"):
            low = max(low, math.floor(value) + 1 if key == "exclusiveMinimum" else math.ceil(value))
        elif key in ("maximum", "exclusiveMaximum"):
            high = min(high, math.ceil(value) - 1 if key == "exclusiveMaximum" else math.floor(value))
    if low > high:
        return None
    out: dict = {"type": "integer"}
    if "minimum" in alt or "exclusiveMinimum" in alt:  # a bound past int64 is clamped, never dropped
        out["minimum"] = low
    if "maximum" in alt or "exclusiveMaximum" in alt:
        out["maximum"] = high
    step = alt.get("multipleOf")
    if step is not None and step != int(step):
        return integer_node(_whole_multiples(alt, path), path)
    if step is not None and step != 1:
        if step != int(step) or (("minimum" in out) != ("maximum" in out)):
            raise GrammarError(f"{path}: multipleOf {step} with a one-sided bound is not enforced by the backend")
        out["multipleOf"] = int(step)
    return out


def number_node(alt: dict, path: str) -> dict | None:
    step = alt.get("multipleOf")
    if step is not None and step != int(step):
        return integer_node(_whole_multiples(alt, path), path)
    if step is not None:
        return integer_node(alt, path)
    out: dict = {"type": "number"}
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if key in alt:
            out[key] = float(alt[key])
    return out


def _whole_multiples(alt: dict, path: str) -> dict:
    """A fractional `multipleOf` 1/m (0.01, 0.5, 1e-6) held to integers, the multiples validators' floating-point
    check passes in full: n / float(1/m) rounds to exactly n*m while |n*m| < 2**53 and float(1/m) is within 2**-54
    (relative) of 1/m (1e-5 is not: 3 / 1e-5 is 299999.99999999994). Decimals are left out: 0.07 / 0.01 is
    7.000000000000001, so no decimal pattern is exact. A narrowing, sound (tests/structured/test_differential.py)."""
    step = alt["multipleOf"]
    m = round(1 / step) if 0 < step < 1 else 0
    error = (Fraction(step) - Fraction(1, m)) * m if m > 1 else None
    if error is None or not abs(1 - 1 / (1 + error)) < Fraction(1, 1 << 54):
        raise GrammarError(f"{path}: multipleOf {step} on a number is not enforced by the backend")
    bound = ((1 << 53) - 1) // m
    low, high = max(-bound, alt.get("minimum", -bound)), min(bound, alt.get("maximum", bound))
    rest = {k: v for k, v in alt.items() if k not in ("multipleOf", "minimum", "maximum")}
    return {**rest, "minimum": low, "maximum": high}
