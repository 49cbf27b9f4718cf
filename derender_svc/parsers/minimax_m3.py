"""MiniMax-M3 tool calls (`minimax_m3`, SGLang's `minimax-m3`): every tag carries the `]<]minimax[>[` marker,

    M<tool_call>\\nM<invoke name="f">\\nM<city>Paris M</city>\\nM<items>M<item>a M</item>M</items>\\nM</invoke>\\nM</tool_call>

(M standing for the marker). A parameter is an element named after it; an element holding elements is an
object, or a list where its schema says array (the template writes list items as `<item>`); a name repeated
becomes a list. Leaf text is typed by the schema (vLLM's order: null, integer, number, boolean, object, array,
string), an empty element of a list or object parameter is `[]` / `{}`, and without a schema it stays text. The
parameters stop at the first malformed element (the ones before it are kept, as vLLM does)."""

from __future__ import annotations

from derender_svc.parsers.arguments import dumps
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.schema import convert, properties, type_of

M = "]<]minimax[>["
MIXED = "$text"  # the key of text mixed with child elements (vLLM's)
_DEPTH = 128

Element = str | list  # a leaf's text, or its (name, Element) children


def element(text: str, at: int, depth: int = 1) -> tuple[str, Element, int] | None:
    """The element starting at `at` (`M<name>`): (name, value, end), or None when malformed or unterminated."""
    start = at + len(M) + 1
    end = text.find(">", start)
    name = text[start:end] if end > start else ""
    if depth > _DEPTH or not name.strip() or name.startswith("/"):
        return None
    close, at, parts, children = f"{M}</{name}>", end + 1, [], []
    while True:
        marker = text.find(M, at)
        if marker < 0:
            return None
        parts.append(text[at:marker])
        if text.startswith(close, marker):
            at = marker + len(close)
            break
        child = element(text, marker, depth + 1) if text.startswith(M + "<", marker) else None
        if child is None:
            return None
        children.append(child[:2])
        at = child[2]
    body = "".join(parts)
    if not children:
        return name, body, at
    if body.strip():
        key = MIXED
        while any(child_name == key for child_name, _ in children):
            key = "$" + key
        children.append((key, body))
    return name, children, at


def _container(schema: dict | None) -> tuple[str, dict] | None:
    """("array" | "object", the alternative of `schema` that is one), or None."""
    if not isinstance(schema, dict):
        return None
    kinds = schema.get("type")
    for kind in ("array", "object"):
        if kinds == kind or (isinstance(kinds, list) and kind in kinds):
            return kind, schema
    if kinds is None and "items" in schema:
        return "array", schema
    if kinds is None and ("properties" in schema or "additionalProperties" in schema):
        return "object", schema
    options = [o for o in (schema.get("anyOf") or []) + (schema.get("oneOf") or []) if isinstance(o, dict)]
    return next((found for found in map(_container, options) if found), None)


def value_of(value: Element, schema) -> object:
    schema = schema if isinstance(schema, dict) else None
    container = _container(schema)
    if isinstance(value, str):
        if schema is None:
            return value
        kinds = schema.get("type")
        if (
            container is not None
            and "string" not in (kinds if isinstance(kinds, list) else [kinds])
            and not value.strip()
        ):
            return [] if container[0] == "array" else {}
        return convert(value, type_of(schema))  # null is null, as in every schema-typed format here
    if container is not None and container[0] == "array":
        return [value_of(child, container[1].get("items")) for _, child in value]
    return object_of(value, container[1] if container is not None else None)


def object_of(children: list, schema: dict | None) -> dict:
    props, extra = (schema or {}).get("properties") or {}, (schema or {}).get("additionalProperties")
    result: dict = {}
    repeated: set[str] = set()
    for name, child in children:
        item = value_of(child, props.get(name, extra))
        if name not in result:
            result[name] = item
        elif name in repeated:
            result[name].append(item)
        else:
            result[name] = [result[name], item]
            repeated.add(name)
    return result


class MiniMaxM3ToolParser(BlockToolParser):
    SECTION = ((f"{M}<tool_call>",), (f"{M}</tool_call>",))
    CALLS = ((f"{M}<invoke name=", (f"{M}</invoke>",)),)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        quote = body[:1] if body[:1] in "\"'" else ""
        end = body.find(quote + ">", len(quote))
        name = body[len(quote) : end].strip() if end >= 0 else ""
        if not closed or not name:
            return None
        children, at = [], end + len(quote) + 1
        while True:
            while at < len(body) and body[at].isspace():
                at += 1
            found = element(body, at) if body.startswith(M + "<", at) else None
            if found is None:
                break
            children.append(found[:2])
            at = found[2]
        text = dumps(object_of(children, {"properties": properties(self.tools, name) or {}}))
        return None if text is None else [(name, text)]
