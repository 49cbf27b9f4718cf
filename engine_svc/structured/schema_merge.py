"""Two schema nodes (keywords only, no applicators) met into one: what `allOf` means, keyword by keyword.

Bounds tighten, `required` unites, `type`s intersect (integer within number), enum values must be in both, and
`properties` meet pairwise; a property one side lists is held by the other side to what it gives unlisted
names (its matching `patternProperties`, else its `additionalProperties`). Nested schemas meet as `allOf`,
lowered in turn. Keywords that cannot meet (two different `pattern`s or `format`s) are refused.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine_svc.structured.backend import GrammarError
from engine_svc.structured.strings import both_outside

TYPES = ("string", "integer", "number", "boolean", "null", "array", "object")
FAMILIES = {
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "array": ("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "unevaluatedItems"),
    "object": ("properties", "required", "additionalProperties", "patternProperties", "propertyNames")
    + ("minProperties", "maxProperties", "unevaluatedProperties"),
}
LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
EQUAL = ("pattern", "format", "multipleOf")
NESTED = ("items", "additionalProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}[type(value)]


def types_of(node: dict) -> set[str]:
    """The JSON types a node admits (integer counts apart from number; a number admits integers)."""
    if "enum" in node or "const" in node:
        return {_json_type(v) for v in ([node["const"]] if "const" in node else node["enum"])}
    if "$ref" in node:
        return set(TYPES)
    if "type" in node:
        given = {node["type"]} if isinstance(node["type"], str) else set(node["type"])
        return given | ({"integer"} if "number" in given else set())
    found = {family for family, keys in FAMILIES.items() if any(k in node for k in keys)}
    if not found:
        return set(TYPES)
    return found | ({"integer"} if "number" in found else set())


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def unlisted(node: dict, name: str) -> Any:
    """What `node` holds a property it does not list to."""
    matching = [s for p, s in node.get("patternProperties", {}).items() if re.search(p, name)]
    if matching:
        return {"allOf": matching}
    return node.get("additionalProperties", True)


def merge(a: dict, b: dict, path: str) -> dict | None:
    """`a` and `b` at once; None when nothing satisfies both."""
    if not a or not b:
        return dict(a or b)
    types = types_of(a) & types_of(b)
    if not types:
        return None
    out = {**a, **b}
    if "type" in a or "type" in b:
        out["type"] = sorted(types) if len(types) > 1 else next(iter(types))
    if ("enum" in a or "const" in a) and ("enum" in b or "const" in b):
        left = [a["const"]] if "const" in a else a["enum"]
        right = [b["const"]] if "const" in b else b["enum"]
        out.pop("const", None)
        out["enum"] = [v for v in left if any(_same(v, w) for w in right)]
        if not out["enum"]:
            return None
    for key in LOWER:
        if key in a and key in b:
            out[key] = max(a[key], b[key])
    for key in UPPER:
        if key in a and key in b:
            out[key] = min(a[key], b[key])
    outside = both_outside(a["pattern"], b["pattern"]) if "pattern" in a and "pattern" in b else None
    if outside is not None:  # two "none of these strings" patterns: none of either's
        out["pattern"] = outside
    for key in EQUAL:
        if key in a and key in b and not _same(a[key], b[key]) and not (key == "pattern" and outside):
            raise GrammarError(f"{path}: allOf with two different {key}s ({a[key]!r}, {b[key]!r})")
    for key in NESTED:
        if key in a and key in b:
            out[key] = {"allOf": [a[key], b[key]]}
    if "required" in a and "required" in b:
        out["required"] = list(dict.fromkeys([*a["required"], *b["required"]]))
    if "uniqueItems" in a and "uniqueItems" in b:
        out["uniqueItems"] = a["uniqueItems"] or b["uniqueItems"]
    if "prefixItems" in a and "prefixItems" in b:
        raise GrammarError(f"{path}: allOf with two prefixItems")
    if "patternProperties" in a and "patternProperties" in b:
        raise GrammarError(f"{path}: allOf with two patternProperties")
    if "enum" in out and any(k in out for k in ("minLength", "maxLength", "pattern")):
        out["enum"] = [v for v in out["enum"] if not isinstance(v, str) or _string_admits(out, v)]
        if not out["enum"]:
            return None  # pruned now, before the alternatives multiply
    if "properties" in a or "properties" in b:
        left, right = a.get("properties", {}), b.get("properties", {})
        props = {}
        for name in dict.fromkeys([*left, *right]):
            first = left[name] if name in left else unlisted(a, name)
            second = right[name] if name in right else unlisted(b, name)
            props[name] = _meet(first, second)
            if props[name] is False and name in out.get("required", []):
                return None
        out["properties"] = props
    return out


def _string_admits(node: dict, value: str) -> bool:
    if not node.get("minLength", 0) <= len(value) <= node.get("maxLength", len(value)):
        return False
    try:
        return "pattern" not in node or re.search(node["pattern"], value) is not None
    except re.error:
        return True  # (the validator decides, once the node is built)


def _meet(first: Any, second: Any) -> Any:
    """Two property schemas at once; False where both are finite sets of values and none is in both (a branch
    of one discriminator value meeting another's is pruned here, not once the alternatives have multiplied)."""
    if first is False or second is False:
        return False
    if first is True or second is True:
        return first if second is True else second
    both = {"allOf": [first, second]}
    return False if _values(both) == [] else both


def _values(schema: Any) -> list[Any] | None:
    """The values a schema is held to by its `const`/`enum`, and those of its `allOf` (None: not bounded)."""
    if not isinstance(schema, dict):
        return None
    found = (
        [[schema["const"]]] if "const" in schema else [schema["enum"]] if isinstance(schema.get("enum"), list) else []
    )
    found += [v for sub in schema.get("allOf", []) if (v := _values(sub)) is not None]
    if not found:
        return None
    return [v for v in found[0] if all(any(_same(v, w) for w in other) for other in found[1:])]
