"""`not` as a schema of the forms both backends build, where an exact one is known (rewrite.py applies it to
`not`, and to `if` for "not if"): the same instances are valid as under `not` (Draft 2020-12).

- `{}`/`true`: nothing (False); `{type: T}`: the other types; `{enum: V}`/`{const: v}`: every other type, the
  other booleans, and for strings "" (when no value) and the non-empty strings no value is, as a pattern
  (strings.outside); numbers, arrays and objects among the values are not rewritten.
- `{required: [a, b]}` (other keywords' subschemas holding everywhere): an object missing a or b;
  `{type: object, required: ...}`: that, or any other type; `{allOf: [{required: ...}, ...]}`: the names united.
- `{anyOf: [X, Y]}`: not X and not Y; `{not: X}`: X.
- `{properties: {p: S}, required: [...]}` (and `type: object`): an object missing a required name or holding some
  p with a value not S (each S negated by these rules), or (with `type`) any other type.
"""

from __future__ import annotations

from typing import Any

from engine_svc.structured.strings import outside

ANNOTATIONS = frozenset({"title", "description", "$comment", "examples", "default", "deprecated"})
JSON_TYPES = ("null", "boolean", "number", "string", "array", "object")  # integer within number


def negate(schema: Any) -> Any:
    """A schema valid exactly where `schema` is not (False: nothing is), or None when no rewrite is known."""
    if schema is True or schema == {}:
        return False
    if schema is False:
        return {}
    if not isinstance(schema, dict):
        return None
    keys = set(schema) - ANNOTATIONS
    if keys == {"type"}:
        named = {schema["type"]} if isinstance(schema["type"], str) else set(schema["type"])
        if "integer" in named and "number" not in named:
            return None  # non-integer numbers: not a type
        rest = [t for t in JSON_TYPES if t not in named]
        return {"type": rest} if rest else False
    if keys in ({"enum"}, {"const"}):
        return not_values([schema["const"]] if "const" in schema else schema["enum"])
    names = required_only(schema)
    if names is not None:
        if not names:
            return False  # {required: []} holds everywhere
        return {"type": "object", "anyOf": [{"properties": {n: False}} for n in names]}
    if keys == {"type", "required"} and schema["type"] == "object":
        missing = negate({"required": schema["required"]})
        return None if missing is None else {"anyOf": [{"type": [t for t in JSON_TYPES if t != "object"]}, missing]}
    if keys == {"allOf"} and isinstance(schema["allOf"], list):
        parts = [required_only(x) for x in schema["allOf"]]
        names = [n for p in parts if p is not None for n in p]
        return None if None in parts else negate({"required": names})
    if keys == {"not"}:
        return schema["not"]
    if keys <= {"properties", "required", "type"} and schema.get("type", "object") == "object":
        return _not_object(schema)
    if keys == {"anyOf"} and isinstance(schema["anyOf"], list):
        parts = [negate(x) for x in schema["anyOf"]]
        if any(p is None for p in parts):
            return None
        return {"allOf": parts} if all(p is not False for p in parts) else False
    return None


def _not_object(schema: dict) -> Any:
    props, names = schema.get("properties", {}), schema.get("required", [])
    if not isinstance(props, dict) or not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        return None
    parts: list[Any] = [{"properties": {n: False}} for n in dict.fromkeys(names)]
    for name, sub in props.items():
        other = negate(sub)
        if other is None:
            return None
        if other is not False:
            parts.append({"required": [name], "properties": {name: other}})
    objects = {"type": "object", "anyOf": parts} if parts else False
    if "type" not in schema:
        return objects
    others = {"type": [t for t in JSON_TYPES if t != "object"]}
    return {"anyOf": [others, objects]} if objects is not False else others


def not_values(values: list[Any]) -> Any:
    """Every value but `values` (None: a number, array or object among them, or strings no pattern holds)."""
    if not isinstance(values, list):
        return None
    kinds = {_json_type(v) for v in values}
    if kinds & {"number", "array", "object", None}:
        return None
    parts: list[Any] = [{"type": [t for t in JSON_TYPES if t not in kinds]}]
    booleans = [b for b in (True, False) if not any(v is b for v in values)]
    if "boolean" in kinds and booleans:
        parts.append({"enum": booleans})
    words = sorted({v for v in values if isinstance(v, str)})
    if words:
        pattern = outside(words)
        if pattern is None:
            return None
        parts.append({"type": "string", "pattern": pattern})
        if "" not in words:
            parts.append({"type": "string", "maxLength": 0})
    return {"anyOf": parts}


def required_only(schema: Any) -> list[str] | None:
    """The names of a schema that only lists `required` names (beside annotations and `properties` whose
    subschemas hold everywhere), else None."""
    if not isinstance(schema, dict) or "required" not in schema:
        return None
    props = schema.get("properties", {})
    if not isinstance(props, dict) or any(not _anything(s) for s in props.values()):
        return None
    if set(schema) - ANNOTATIONS - {"properties"} != {"required"}:
        return None
    names = schema["required"]
    return list(dict.fromkeys(names)) if isinstance(names, list) and all(isinstance(n, str) for n in names) else None


def _anything(schema: Any) -> bool:
    return schema is True or (isinstance(schema, dict) and not set(schema) - ANNOTATIONS)


def _json_type(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value))
