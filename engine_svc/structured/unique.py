"""`uniqueItems` held exactly, in forms both backends build (neither enforces the keyword itself): applied after
rewrite.exact, before either backend sees a schema. Every output stays valid; some become narrower.

- Items from a small finite set (`const`, `enum` or boolean items of scalar values, at most MAX_VALUES): the array
  is one of the tuples of distinct values in the set's order (`prefixItems` with `items: false`), for each subset
  whose size `minItems`/`maxItems` allow. Every set of values can be written; only their order is fixed.
- Any other items: at most one item (`maxItems: 1`), which is unique by itself, where `minItems` allows it. Where
  it asks for two or more, `uniqueItems` stays and is refused (json_schema.py, llguidance).
docs/structured-outputs.md says so to users.
"""

from __future__ import annotations

import itertools
from typing import Any

from engine_svc.structured.rewrite import same_value, subschemas, values_of

MAX_VALUES = 6  # 2**6 = 64 tuples at most (json_schema.MAX_BRANCHES)
SCALARS = (str, int, float, bool, type(None))
NOT_ARRAYS = ["null", "boolean", "number", "string", "object"]


def hold(node: Any) -> Any:
    """`node` with each `uniqueItems: true` replaced by the forms above where they apply (a copy)."""
    if not isinstance(node, dict):
        return node
    out = subschemas(node, hold)
    if out.get("uniqueItems") is not True or "prefixItems" in out:
        return out
    low, high = out.get("minItems", 0), out.get("maxItems")
    values = _distinct(values_of(out.get("items")))
    if values is not None and len(values) <= MAX_VALUES and isinstance(low, int):
        top = len(values) if not isinstance(high, int) else min(high, len(values))
        tuples = [
            {"type": "array", "prefixItems": [{"const": v} for v in chosen], "items": False}
            for size in range(low, top + 1)
            for chosen in itertools.combinations(values, size)
        ]
        if not tuples:
            return out  # no array can be written: refused as before
        del out["uniqueItems"]
        arrays_only = out.get("type") == "array"
        out["allOf"] = [*out.get("allOf", []), {"anyOf": tuples if arrays_only else [{"type": NOT_ARRAYS}, *tuples]}]
        return out
    if isinstance(low, int) and low <= 1:
        del out["uniqueItems"]
        out["maxItems"] = 1 if not isinstance(high, int) else min(high, 1)
    return out


def _distinct(values: list[Any] | None) -> list[Any] | None:
    if values is None or not all(isinstance(v, SCALARS) for v in values):
        return None
    kept: list[Any] = []
    for value in values:
        if not any(same_value(value, seen) for seen in kept):
            kept.append(value)
    return kept
