"""Argument values that arrive as text (XML-style formats), typed by the request's tool schemas.

Follows vLLM's qwen3_coder conversion: `null` is null; string-like types stay text; integer types go through
`int`, number types through `float` (integral values become ints); booleans compare with "true"; objects and
arrays are JSON, else Python literals; a value that does not convert, a parameter the schema does not name,
or a tool without a schema stays text. `loose` (GLM-4.5 without a schema) decodes JSON when it can."""

from __future__ import annotations

import ast
import json

from google.protobuf import json_format

_STRINGS = {"string", "str", "text", "varchar", "char", "enum"}
_INTS = ("int", "uint", "long", "short", "unsigned")


def parameter_types(tools, function: str) -> dict[str, str] | None:
    """{parameter: JSON-schema type} of `function` among `tools` (proto Tool messages or OpenAI dicts)."""
    props = properties(tools, function)
    return None if props is None else {key: type_of(value) for key, value in props.items() if isinstance(value, dict)}


def properties(tools, function: str) -> dict | None:
    """The `properties` schema of `function`'s parameters among `tools`; None when no tool has that name."""
    params = parameters(tools, function)
    return None if params is None else params.get("properties") or {}


def parameters(tools, function: str) -> dict | None:
    """The parameters schema of `function` among `tools` ({} when it has none); None when no tool has that name."""
    for tool in tools:
        if isinstance(tool, dict):
            spec = tool.get("function", tool)
            name, params = spec.get("name"), spec.get("parameters") or {}
        else:
            name = tool.function.name
            params = json_format.MessageToDict(tool.function.parameters) if tool.function.HasField("parameters") else {}
        if name == function:
            return params
    return None


def tool_names(tools) -> list[str]:
    """The function names of `tools`, in order."""
    return [tool.get("function", tool).get("name") if isinstance(tool, dict) else tool.function.name for tool in tools]


def type_of(prop: dict) -> str:
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind is None:
        for option in prop.get("anyOf") or prop.get("oneOf") or []:
            if isinstance(option, dict) and option.get("type") not in (None, "null"):
                return type_of(option)
        return "object" if "properties" in prop else "string"
    return str(kind).lower()


def convert(value: str, kind: str | None, loose: bool = False):
    """The typed value of `value` for a parameter of JSON-schema type `kind` (None: unknown)."""
    if value.lower() == "null":
        return None
    if kind is None:
        return _json_or(value, value) if loose else value
    if kind in _STRINGS:
        return value
    if kind.startswith(_INTS):
        try:
            return int(value)
        except ValueError:
            return value
    if kind.startswith(("num", "float", "double")):
        try:
            number = float(value)
            return number if number - int(number) != 0 else int(number)
        except (ValueError, OverflowError):
            return value
    if kind in ("boolean", "bool", "binary"):
        return value.strip().lower() == "true"
    return _json_or(value, _literal_or(value, value))


def _json_or(value: str, default):
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return default


def _literal_or(value: str, default):
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return default
