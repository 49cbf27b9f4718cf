"""JSON schemas lowered to the subset xgrammar enforces exactly, or refused naming the path and keyword.

xgrammar builds a node from one keyword family and drops the rest: a node with `$ref`, `anyOf`, `oneOf` or
`allOf` is built from that keyword alone (its own `type`, `properties`, `required`, `maxLength`... are lost),
`oneOf` is enforced as `anyOf`, a `format` wins over a `pattern` and both over `minLength`/`maxLength`, `required`
names missing from `properties` are dropped under strict mode, `not`/`if`/`dependent*`/`contains`/`uniqueItems`
are ignored (json_schema_converter.cc). So the backend never sees a schema as written: `lower` rewrites it into
nodes of one shape each, which xgrammar builds faithfully:
- `{}` (any value), `{"enum": [...]}`, `{"anyOf": [...]}`, `{"$ref": "#/$defs/dN"}`, or `{"type": <one type>,
  ...that type's keywords}`;
- applicators are resolved by distributing: a node's own keywords are merged into each `anyOf`/`oneOf` branch,
  `allOf` subschemas and `$ref` targets beside other keywords are merged into one node (bounds tightened,
  `required` united, `properties` met pairwise); a `$ref` alone stays a reference (recursion works);
- `required` names missing from `properties` get the schema the object gives them (a matching
  `patternProperties` or `additionalProperties`); enum values are kept only where the rest of the node accepts them;
- `oneOf` is kept (as `anyOf`) only where no output of one branch can satisfy another (different types, a
  discriminating enum, or a required name the other branch never writes); otherwise refused;
- typeless nodes with type keywords (`{"minLength": 2}`) are held to those types, which is sound (a subset).
Forms with an exact rewrite (rewrite.py: `not` of `{}`/`required`, `oneOf` of `required` lists) are rewritten
first. What no rewrite can express is refused (GrammarError "path: keyword ..."). Keywords the 2020-12 validator does
not know are annotations and dropped, as are `format`s no validator checks (`int32`, ...); integer bounds are
made whole and clamped to int64. Outputs may be narrower than the schema (strict mode: no properties or items
beyond those listed), never wider: tests/structured/test_differential.py proves it on real schemas.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import jsonschema
import referencing.exceptions

from engine_svc.structured import rewrite
from engine_svc.structured.backend import GrammarError
from engine_svc.structured.schema_merge import TYPES, merge, types_of, unlisted
from engine_svc.structured.strings import mis_compiled, string_node

KEYWORDS = frozenset(jsonschema.Draft202012Validator.VALIDATORS)  # everything else is an annotation
REFUSED = ("not", "dependentRequired", "dependentSchemas", "contains", "$dynamicRef")
APPLICATORS = ("$ref", "allOf", "anyOf", "oneOf")
INT64 = (1 << 63) - 1
MAX_BRANCHES = 64


class InvalidSchema(GrammarError):
    """The schema is not a valid 2020-12 schema: no backend may take it."""


class Unsatisfiable(GrammarError):
    """No value satisfies the node (a branch that drops out, or a refusal where nothing is left)."""


class Lowering:
    def __init__(self, root: Any):
        self.validator = jsonschema.Draft202012Validator(root)
        self.defs: dict[str, Any] = {}
        self._names: dict[int, str] = {}
        self._expanding: list[int] = []  # $ref targets being merged into a node
        self._building: set[int] = set()  # $ref targets being lowered into $defs

    # -- applicators: a schema -> its alternatives (merged dicts, no applicator but a lone $ref) --

    def alternatives(self, schema: Any, path: str) -> list[dict]:
        if schema is True or schema == {}:
            return [{}]
        if schema is False:
            return []
        own = {k: v for k, v in schema.items() if k in KEYWORDS and k not in APPLICATORS}
        for key in REFUSED:
            if key in own:
                raise GrammarError(f"{path}: {key} is not enforced by the grammar backend")
        if "if" in own and ("then" in schema or "else" in schema):
            raise GrammarError(f"{path}: if/then/else is not enforced by the grammar backend")
        own.pop("if", None)
        alts = [own]
        if "$ref" in schema:
            alts = self.conjoin(alts, [{"$ref": schema["$ref"]}], path)
        for i, sub in enumerate(schema.get("allOf", [])):
            alts = self.conjoin(alts, self.alternatives(sub, f"{path}/allOf/{i}"), f"{path}/allOf/{i}")
        if "anyOf" in schema:
            branches = [self.alternatives(s, f"{path}/anyOf/{i}") for i, s in enumerate(schema["anyOf"])]
            alts = self.conjoin(alts, [a for b in branches for a in b], f"{path}/anyOf")
        if "oneOf" in schema:
            branches = [
                self.conjoin(alts, self.alternatives(s, f"{path}/oneOf/{i}"), path)
                for i, s in enumerate(schema["oneOf"])
            ]
            self._check_disjoint(branches, f"{path}/oneOf")
            alts = [a for b in branches for a in b]
        return alts

    def conjoin(self, left: list[dict], right: list[dict], path: str) -> list[dict]:
        out = []
        for a in left:
            for b in right:
                if not a or not b:  # a lone $ref stays a reference
                    out.append(a or b)
                    continue
                for x in self._expand(a, path):
                    for y in self._expand(b, path):
                        merged = merge(x, y, path)
                        if merged is not None:
                            out.append(merged)
                if len(out) > MAX_BRANCHES:
                    raise GrammarError(f"{path}: more than {MAX_BRANCHES} alternatives once anyOf/oneOf/allOf combine")
        return out

    def _expand(self, alt: dict, path: str) -> list[dict]:
        """A lone `$ref` that meets other keywords: its target's alternatives (merged with whatever else)."""
        if "$ref" not in alt:
            return [alt]
        target = self._resolve(alt["$ref"], path)
        if id(target) in self._expanding or id(target) in self._building:
            raise GrammarError(f"{path}: $ref {alt['$ref']!r} is recursive and meets other keywords")
        self._expanding.append(id(target))
        try:
            rest = {k: v for k, v in alt.items() if k != "$ref"}
            return self.conjoin([rest], self.alternatives(target, alt["$ref"]), path)
        finally:
            self._expanding.pop()

    def _resolve(self, ref: str, path: str) -> Any:
        try:
            return self.validator._resolver.lookup(ref).contents
        except referencing.exceptions.Unresolvable:
            raise GrammarError(f"{path}: $ref {ref!r} does not resolve inside the schema") from None

    def _check_disjoint(self, branches: list[list[dict]], path: str) -> None:
        expanded = [[x for a in b for x in self._expand(a, path)] for b in branches]
        for i, left in enumerate(expanded):
            for j in range(i + 1, len(expanded)):
                for a in left:
                    for b in expanded[j]:
                        if not (self._excludes(a, b) and self._excludes(b, a)):
                            raise GrammarError(
                                f"{path}: branches {i} and {j} may both match (oneOf is enforced only where the "
                                "branches cannot overlap; use anyOf)"
                            )

    def _excludes(self, a: dict, b: dict) -> bool:
        """No output generated for `a` is valid under `b`."""
        ta, tb = types_of(a), types_of(b)
        if not (ta & tb or ("integer" in ta and "number" in tb) or ("number" in ta and "integer" in tb)):
            return True
        check = self.validator.evolve(schema=b)
        if "enum" in a:
            return not any(check.is_valid(v) for v in a["enum"])
        if "enum" in b and not any(self.validator.evolve(schema=a).is_valid(v) for v in b["enum"]):
            return True
        closed = a.get("additionalProperties", False) is False and "patternProperties" not in a  # writes only its own
        if ta == {"object"} and "object" in tb and closed:
            written = set(a.get("properties", {})) | set(a.get("required", []))
            if set(b.get("required", [])) - written:
                return True
            for name in a.get("required", []):
                left = a.get("properties", {}).get(name)
                right = b.get("properties", {}).get(name, unlisted(b, name))
                if right is False:
                    return True
                if isinstance(left, dict) and ("const" in left or "enum" in left):
                    values = [left["const"]] if "const" in left else left["enum"]
                    if not any(self.validator.evolve(schema=right).is_valid(v) for v in values):
                        return True
        return False

    # -- alternatives -> nodes xgrammar builds exactly --

    def build(self, schema: Any, path: str) -> Any:
        alts = self.alternatives(schema, path)
        nodes = [n for a in alts if (n := self.node(a, path)) is not None]
        if not nodes:
            raise Unsatisfiable(f"{path}: no value satisfies this schema (as the grammar backend enforces it)")
        return nodes[0] if len(nodes) == 1 else {"anyOf": nodes}

    def node(self, alt: dict, path: str) -> Any:
        if "$ref" in alt:
            return {"$ref": f"#/$defs/{self._define(alt['$ref'], path)}"}
        if "enum" in alt or "const" in alt:
            values = [alt["const"]] if "const" in alt else alt["enum"]
            rest = self.validator.evolve(schema={k: v for k, v in alt.items() if k not in ("enum", "const")})
            kept = [v for v in values if rest.is_valid(v)]
            return {"enum": kept} if kept else None
        types = sorted(types_of(alt) - ({"integer"} if "number" in types_of(alt) else set()))
        if set(types) == set(TYPES) and not alt:
            return {}
        nodes = [n for t in types if (n := getattr(self, f"_{t}")(alt, path)) is not None]
        return None if not nodes else nodes[0] if len(nodes) == 1 else {"anyOf": nodes}

    def _define(self, ref: str, path: str) -> str:
        target = self._resolve(ref, path)
        name = self._names.get(id(target))
        if name is None:
            name = self._names[id(target)] = f"d{len(self._names)}"
            self._building.add(id(target))
            try:
                self.defs[name] = self.build(target, ref)
            finally:
                self._building.discard(id(target))
        return name

    def _string(self, alt: dict, path: str) -> dict | None:
        return string_node(alt, path)

    def _integer(self, alt: dict, path: str) -> dict | None:
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
        if step is not None and step != 1:
            if step != int(step) or (("minimum" in out) != ("maximum" in out)):
                raise GrammarError(f"{path}: multipleOf {step} with a one-sided bound is not enforced by the backend")
            out["multipleOf"] = int(step)
        return out

    def _number(self, alt: dict, path: str) -> dict | None:
        step = alt.get("multipleOf")
        if step is not None:
            if step != int(step):
                raise GrammarError(f"{path}: multipleOf {step} on a number is not enforced by the backend")
            return self._integer(alt, path)
        out: dict = {"type": "number"}
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if key in alt:
                out[key] = float(alt[key])
        return out

    def _boolean(self, alt: dict, path: str) -> dict:
        return {"type": "boolean"}

    def _null(self, alt: dict, path: str) -> dict:
        return {"type": "null"}

    def _array(self, alt: dict, path: str) -> dict | None:
        out: dict = {"type": "array"}
        if alt.get("uniqueItems") is True and alt.get("maxItems", 2) > 1:
            raise GrammarError(f"{path}: uniqueItems is not enforced by the backend")
        if "unevaluatedItems" in alt and alt["unevaluatedItems"] is not False:
            raise GrammarError(f"{path}: unevaluatedItems is not enforced by the backend")
        prefix = alt.get("prefixItems", [])
        if prefix:
            out["prefixItems"] = [self.build(p, f"{path}/prefixItems/{i}") for i, p in enumerate(prefix)]
        items = alt.get("items", False if prefix or "unevaluatedItems" in alt else None)
        if items is False:
            out["items"] = False
        elif items is not None:
            try:
                out["items"] = self.build(items, f"{path}/items")
            except Unsatisfiable:
                if alt.get("minItems", 0) > len(prefix):
                    return None
                out["items"] = False  # no item can be written: only the prefix
        for key in ("minItems", "maxItems"):
            if key in alt:
                out[key] = alt[key]
        return out

    def _object(self, alt: dict, path: str) -> dict | None:
        if alt.get("unevaluatedProperties", False) is not False:
            raise GrammarError(f"{path}: unevaluatedProperties is not enforced by the backend")
        patterns = alt.get("patternProperties", {})
        extra = alt.get("additionalProperties", True)
        required = list(dict.fromkeys(alt.get("required", [])))
        given = dict(alt.get("properties", {}))
        for name in required:
            if name not in given:
                matching = [s for p, s in patterns.items() if re.search(p, name)]
                given[name] = {"allOf": matching} if matching else extra
        props = {}
        for name, schema in given.items():
            matching = [s for p, s in patterns.items() if re.search(p, name)]
            schema = {"allOf": [schema, *matching]} if matching else schema
            try:
                props[name] = self.build(schema, f"{path}/properties/{name}")
            except Unsatisfiable:
                if name in required:
                    return None
        out: dict = {"type": "object", "properties": props}
        if required:
            out["required"] = required
        for pattern in patterns:
            if mis_compiled(pattern):
                raise GrammarError(f"{path}: patternProperties {pattern!r} is one the backend mis-compiles")
        if patterns:
            out["patternProperties"] = {p: self.build(s, f"{path}/patternProperties/{p}") for p, s in patterns.items()}
        if "additionalProperties" in alt and extra is not False:
            out["additionalProperties"] = self.build(extra, f"{path}/additionalProperties")
        else:
            out["additionalProperties"] = False
        if "propertyNames" in alt:
            if patterns:  # xgrammar writes pattern-matched names without checking them
                raise GrammarError(f"{path}: propertyNames beside patternProperties is not enforced by the backend")
            names = [x for a in self.alternatives(alt["propertyNames"], path) for x in self._expand(a, path)]
            nodes = [n for a in names if (n := self.node(a, f"{path}/propertyNames")) is not None]
            if not nodes:
                return None if required or alt.get("minProperties", 0) > 0 else {**out, "properties": {}}
            out["propertyNames"] = nodes[0] if len(nodes) == 1 else {"anyOf": nodes}
        for key in ("minProperties", "maxProperties"):
            if key in alt:
                out[key] = alt[key]
        return out


def check(schema: Any) -> None:
    """InvalidSchema unless `schema` is a valid 2020-12 schema."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as error:
        where = "#/" + "/".join(map(str, error.absolute_path))
        raise InvalidSchema(f"{where.rstrip('/')}: not a valid JSON Schema (2020-12): {error.message}") from None


def lower(schema: Any) -> Any:
    """`schema` as the backend must see it to enforce all of it; GrammarError naming what it cannot."""
    if schema is True:
        return {}
    check(schema)
    schema = rewrite.exact(schema)  # (paths in refusals are the rewritten schema's)
    lowering = Lowering(schema)
    out = lowering.build(schema, "#")
    return {**out, "$defs": lowering.defs} if lowering.defs else out


def lower_text(text: str) -> str:
    return json.dumps(lower(json.loads(text)), ensure_ascii=False)
