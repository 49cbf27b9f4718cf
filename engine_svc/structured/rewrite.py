"""Exact rewrites of JSON Schema forms neither backend builds into forms both do: the same instances are valid
before and after (Draft 2020-12), so no output gets wider or narrower. Applied before either backend sees a
schema (json_schema.lower for xgrammar, llguidance_backend for llguidance).

- `not`: the forms of negation.py (`{}`, a `type`, `enum`/`const` values, `required` lists, `anyOf`).
- `if`/`then`/`else`: "(if and then) or (not if and else)" where `not if` has an exact form (negation.py, or
  `required` lists and `properties` of `const`/`enum` values: a discriminator, whose "not" is the rest of the
  finite set the node holds it to, else every other value: negation.not_values).
- `dependentRequired`, `dependentSchemas`, draft-07's `dependencies`: per name, "absent, or present with those
  names / that schema" (`anyOf`).
- `oneOf` whose branches admit values of different JSON types (by `type`, `const`, `enum`, local `$ref`s): `anyOf`.
- `oneOf` whose branches only list `required` names (JSONSchemaBench's most common overlapping `oneOf`, "exactly
  one of these"): branch i becomes its names present and, for every other branch, one of that branch's other
  names absent; the branches are then disjoint and it is an `anyOf`. Non-objects satisfy every such branch, so
  they satisfy none of the `oneOf` when it has two or more: the node is held to objects.
`subschemas` maps a function over every subschema position of a node (what the rewrites and llguidance's
preparation walk).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine_svc.structured.negation import ANNOTATIONS, negate, not_values, required_only

# Schema keywords whose value is a map of subschemas, and those whose value is a subschema or a list of them.
MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
SUBSCHEMAS = (
    "items", "prefixItems", "additionalProperties", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
    "contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems",
)  # fmt: skip
# 2020-12's dependentRequired / dependentSchemas, and draft-07's dependencies (either form): a schema that names
# draft-07 is validated under it where a $ref enters it (jsonschema follows $schema), so it is a keyword here.
DEPENDENCIES = ("dependentRequired", "dependentSchemas", "dependencies")


def subschemas(node: dict, fn: Callable[[Any], Any]) -> dict:
    """A copy of `node` with `fn` applied to each of its direct subschemas."""
    out = dict(node)
    for key in MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: fn(sub) for name, sub in out[key].items()}
    for key in SUBSCHEMAS:
        value = out.get(key)
        if isinstance(value, dict):
            out[key] = fn(value)
        elif isinstance(value, list):
            out[key] = [fn(item) for item in value]
    return out


def exact(root: Any) -> Any:
    """`root` with the rewrites above applied everywhere (a copy)."""
    return _Rewrite(root).node(root)


class _Rewrite:
    def __init__(self, root: Any):
        self.root = root

    def node(self, node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        out = subschemas(node, self.node)
        for key in DEPENDENCIES:
            spec = out.get(key)
            if isinstance(spec, dict) and all(_names(v) or isinstance(v, (dict, bool)) for v in spec.values()):
                out["allOf"] = [*out.get("allOf", []), *_dependencies(out.pop(key), self.node)]
        if isinstance(out.get("oneOf"), list) and self._disjoint_types(out["oneOf"]):
            branches = out.pop("oneOf")
            if "anyOf" in out:
                out["allOf"] = [*out.get("allOf", []), {"anyOf": branches}]
            else:
                out["anyOf"] = branches
        if "if" in out and ("then" in out or "else" in out):
            branches = self._conditional(out)
            if branches is not None:
                for key in ("if", "then", "else"):
                    out.pop(key, None)
                out["allOf"] = [*out.get("allOf", []), {"anyOf": branches}]
        return _rewrite(out)

    def _conditional(self, node: dict) -> list[Any] | None:
        """`if`/`then`/`else` as "(if and then) or (not if and else)", where `not if` has an exact form: `if`
        lists `required` names and `properties` held to `const`/`enum` values, and each such property is held by
        the node itself to a finite set (its `enum`/`const`, or boolean): outside `if`'s values means inside the rest."""
        test = node["if"]
        negated = negate(test)
        if negated is None:
            negated = self._negate_discriminator(test, node)
        if negated is None:
            return None
        then, otherwise = node.get("then", True), node.get("else", True)
        out = [{"allOf": [case, then]} for case in _cases(test)]
        return out + [{"allOf": [negated, otherwise]}] if negated is not False else out

    def _negate_discriminator(self, test: Any, node: dict) -> Any:
        if not isinstance(test, dict) or not set(test) - ANNOTATIONS <= {"properties", "required", "type"}:
            return None
        if test.get("type", "object") != "object" or not isinstance(test.get("properties", {}), dict):
            return None
        required = required_only({"required": test.get("required", [])}) if "required" in test else []
        if required is None:
            return None
        parts: list[Any] = [{"type": "object", "properties": {name: False}} for name in required]
        if "type" in test:
            parts.append({"type": ["null", "boolean", "number", "string", "array"]})
        own = node.get("properties", {}) if isinstance(node.get("properties"), dict) else {}
        for name, sub in test.get("properties", {}).items():
            if sub is True or (isinstance(sub, dict) and not set(sub) - ANNOTATIONS):
                continue  # holds for any value
            values = values_of(sub)
            domain = values_of(self._deref(own.get(name)))
            if values is None:
                return None
            if domain is None:  # any value but the test's
                if (other := not_values(values)) is None:
                    return None
                parts.append({"type": "object", "required": [name], "properties": {name: other}})
                continue
            rest = [v for v in domain if not any(same_value(v, w) for w in values)]
            if rest:
                parts.append({"type": "object", "required": [name], "properties": {name: {"enum": rest}}})
        return {"anyOf": parts} if parts else False

    def _deref(self, schema: Any) -> Any:
        for _ in range(8):
            if not (
                isinstance(schema, dict)
                and isinstance(schema.get("$ref"), str)
                and set(schema) - ANNOTATIONS == {"$ref"}
            ):
                break
            schema = self._resolve(schema["$ref"])
        return schema

    def _disjoint_types(self, branches: list) -> bool:
        """No two branches admit a value of the same JSON type (then `oneOf` is `anyOf`)."""
        seen: set[str] = set()
        for branch in branches:
            kinds = self._types(branch, 0)
            if kinds is None or kinds & seen:
                return False
            seen |= kinds
        return True

    def _types(self, schema: Any, depth: int) -> set[str] | None:
        """The JSON types `schema` may admit (None: any, or not known); `number` stands for integers too."""
        if not isinstance(schema, dict) or depth > 8:
            return None if schema is not False else set()
        found: set[str] | None = None
        if isinstance(schema.get("type"), (str, list)):
            named = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
            found = {t for n in named for t in (("number", "integer") if n == "number" else (n,))}
        for key in ("const", "enum"):
            if key in schema:
                values = [schema[key]] if key == "const" else schema[key]
                if not isinstance(values, list):
                    return None
                kinds = {t for v in values for t in _json_types(v)}
                found = kinds if found is None else found & kinds
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self._resolve(ref)
            kinds = None if target is None else self._types(target, depth + 1)
            if kinds is not None:
                found = kinds if found is None else found & kinds
        return found

    def _resolve(self, ref: str) -> Any:
        """A local `#/...` reference's target (None: any other kind)."""
        if ref == "#":
            return self.root
        if not ref.startswith("#/"):
            return None
        node = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node


def exclusive(branches: Any) -> Any:
    """`oneOf: branches` as an `anyOf` of "branch i and not each other branch" where every branch has an exact
    negation (negation.py), else None. Exact; a fallback for `oneOf`s whose branches may overlap (each negation
    multiplies the alternatives a backend builds)."""
    if not isinstance(branches, list) or len(branches) < 2:
        return None
    others = [negate(b) for b in branches]
    if any(n is None for n in others):
        return None
    out = [
        {"allOf": [branch, *(n for j, n in enumerate(others) if j != i)]}
        for i, branch in enumerate(branches)
        if not any(n is False for j, n in enumerate(others) if j != i)
    ]
    return {"anyOf": out} if out else False


def without_one_of(node: Any) -> Any:
    """`node` with every `oneOf` that `exclusive` expresses rewritten so (a copy): for a backend that takes
    `oneOf` only where it proves the branches disjoint."""
    if not isinstance(node, dict):
        return node
    out = subschemas(node, without_one_of)
    exact = exclusive(out.get("oneOf"))
    if exact is not None:
        del out["oneOf"]
        out["allOf"] = [*out.get("allOf", []), exact]
    return out


def _cases(test: Any) -> list[Any]:
    """`test` as disjoint cases: `{properties: {p: S}}` alone holds where p is absent or p is present and S
    holds (so a chain of `if`s on one discriminator meets as one case per value, not every combination)."""
    if not isinstance(test, dict) or set(test) - ANNOTATIONS != {"properties"}:
        return [test]
    props = test["properties"]
    if not isinstance(props, dict) or len(props) != 1:
        return [test]
    [(name, sub)] = props.items()
    return [{"properties": {name: False}}, {"required": [name], "properties": {name: sub}}]


def _dependencies(spec: dict, rewrite: Callable[[Any], Any]) -> list[Any]:
    """Each `name: [names]` or `name: schema` as "name absent, or present with those names / that schema"."""
    out: list[Any] = []
    for name, then in spec.items():
        present = {"required": [name, *then]} if _names(then) else {"allOf": [{"required": [name]}, rewrite(then)]}
        out.append({"anyOf": [{"properties": {name: False}}, present]})
    return out


def values_of(schema: Any) -> list[Any] | None:
    """The values a schema of only `const`, `enum` or `type: boolean` (and annotations) allows, else None."""
    if not isinstance(schema, dict):
        return None
    keys = set(schema) - ANNOTATIONS
    if keys == {"const"} or (keys == {"const", "type"} and schema["type"] in _json_types(schema["const"])):
        return [schema["const"]]
    if (
        keys in ({"enum"}, {"enum", "type"})
        and isinstance(schema["enum"], list)
        and isinstance(schema.get("type", ""), str)
    ):
        return [v for v in schema["enum"] if "type" not in schema or schema["type"] in _json_types(v)]
    if keys == {"type"} and schema["type"] == "boolean":
        return [True, False]
    return None


def same_value(a: Any, b: Any) -> bool:
    """JSON equality (true is not 1)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(n, str) for n in value)


def _json_types(value: Any) -> tuple[str, ...]:
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("boolean",)
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return ("number", "integer")
    return {float: ("number",), str: ("string",), list: ("array",), dict: ("object",)}.get(type(value), ())


def _rewrite(out: dict) -> Any:
    """`not` and `oneOf` of `required` lists, rewritten in one node (its subschemas are already)."""
    if "not" in out:
        negated = negate(out["not"])
        if negated is False:
            return False
        if negated is not None:
            del out["not"]
            out["allOf"] = [*out.get("allOf", []), negated]
    if isinstance(out.get("oneOf"), list):
        branches = [names for b in out["oneOf"] if (names := required_only(b)) is not None]
        if len(branches) >= 2 and len(branches) == len(out["oneOf"]):
            out["allOf"] = [*out.get("allOf", []), {"type": "object", "anyOf": _exactly_one(branches)}]
            del out["oneOf"]
    return out


def _exactly_one(branches: list[list[str]]) -> list[Any]:
    """For `oneOf` of required-only branches: each branch's names present, some name of every other absent."""
    out: list[Any] = []
    for i, names in enumerate(branches):
        parts: list[Any] = []
        for j, other in enumerate(branches):
            missing = [n for n in other if n not in names]
            if j == i:
                continue
            if not missing:
                parts = [False]  # branch j holds wherever branch i does: branch i never holds alone
                break
            absent = [{"properties": {n: False}} for n in missing]
            parts.append(absent[0] if len(absent) == 1 else {"anyOf": absent})
        if parts != [False]:
            out.append({"required": names, "allOf": parts} if parts else {"required": names})
    return out or [False]
