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
  `required` united, `properties` met pairwise); a `$ref` alone stays a reference (recursion works); a `$ref`
  with siblings whose target reaches itself is defined once per set of siblings (`$defs`: the target met with
  them, the recursion inside going on through the plain target) -- exact;
- `required` names missing from `properties` get the schema the object gives them (a matching
  `patternProperties` or `additionalProperties`); enum values are kept only where the rest of the node accepts them;
- `oneOf` is kept (as `anyOf`) only where no output of one branch can satisfy another (different types, a
  discriminator: a required name whose values in one branch the other rejects, or a required name the other
  (closed) branch never writes); otherwise refused;
- typeless nodes with type keywords (`{"minLength": 2}`) are held to those types, which is sound (a subset).
Forms with an exact rewrite (rewrite.py, negation.py: `not`, `if`, `dependent*`, `oneOf` of `required` lists) are
rewritten first. What no rewrite can express is refused (GrammarError "path: keyword ..."). Keywords the 2020-12 validator does
not know are annotations and dropped, as are `format`s no validator checks (`int32`, ...); numbers.py makes integer
bounds whole and holds a fractional `multipleOf` (0.01) to integers, the values validators' float check passes. Outputs may be narrower than the schema (strict mode: no properties or items
beyond those listed), never wider: tests/structured/test_differential.py proves it on real schemas.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

from engine_svc.structured import rewrite, unique
from engine_svc.structured.backend import GrammarError
from engine_svc.structured.numbers import integer_node, number_node
from engine_svc.structured.refs import Refs
from engine_svc.structured.schema_merge import TYPES, merge, types_of, unlisted
from engine_svc.structured.strings import mis_compiled, string_node

KEYWORDS = frozenset(jsonschema.Draft202012Validator.VALIDATORS)  # everything else is an annotation
REFUSED = ("not", "dependentRequired", "dependentSchemas", "contains", "$dynamicRef")
APPLICATORS = ("$ref", "allOf", "anyOf", "oneOf")
MAX_BRANCHES = 64
MAX_DEFS = 512


class InvalidSchema(GrammarError):
    """The schema is not a valid 2020-12 schema: no backend may take it."""


class Unsatisfiable(GrammarError):
    """No value satisfies the node (a branch that drops out, or a refusal where nothing is left)."""


class Lowering:
    def __init__(self, root: Any):
        self.validator = jsonschema.Draft202012Validator(root)
        self.defs: dict[str, Any] = {}
        self._names: dict[tuple[int, str], str] = {}
        self._expanding: list[int] = []  # $ref targets being merged into a node or lowered into $defs
        self.refs = Refs(self.validator)
        self._unsatisfiable: set[tuple[int, str]] = set()  # (target, siblings) no value satisfies

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
            try:
                self._check_disjoint(branches, f"{path}/oneOf")
                alts = [a for b in branches for a in b]
            except GrammarError:
                exact = rewrite.exclusive(schema["oneOf"])  # each branch and no other, where that is expressible
                if exact is None:
                    raise
                alts = self.conjoin(alts, self.alternatives(exact, f"{path}/oneOf"), f"{path}/oneOf")
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
                        for z in self._second_ref(x, y, path):
                            if "$ref" in x and "$ref" in z:
                                raise GrammarError(f"{path}: $ref {x['$ref']!r} is recursive and meets another $ref")
                            merged = merge(x, z, path)
                            if merged is not None:
                                out.append(merged)
                if len(out) > MAX_BRANCHES:
                    raise GrammarError(f"{path}: more than {MAX_BRANCHES} alternatives once anyOf/oneOf/allOf combine")
        return out

    def _expand(self, alt: dict, path: str, inline: bool = False) -> list[dict]:
        """A `$ref` that meets other keywords: its target's alternatives merged with them (a recursive one is
        kept, unless `inline`: then only a reference back from inside its applicators is)."""
        if "$ref" not in alt:
            return [alt]
        target = self._resolve(alt["$ref"], path)
        if id(target) in self._expanding or (not inline and self.refs.cyclic(target, path)):
            return [alt]  # recursive: kept as a reference with siblings, defined once per siblings (node)
        self._expanding.append(id(target))
        try:
            rest = {k: v for k, v in alt.items() if k != "$ref"}
            return self.conjoin([rest], self.alternatives(target, alt["$ref"]), path)
        finally:
            self._expanding.pop()

    def _second_ref(self, x: dict, y: dict, path: str) -> list[dict]:
        """`y` to merge into `x` where both keep a recursive reference: the same target's siblings alone, else
        the second inlined once (its applicators, not its properties)."""
        if "$ref" not in x or "$ref" not in y:
            return [y]
        if self._resolve(x["$ref"], path) is self._resolve(y["$ref"], path):
            return [{k: v for k, v in y.items() if k != "$ref"}]
        return self._expand(y, path, inline=True)

    def _resolve(self, ref: str, path: str) -> Any:
        return self.refs.resolve(ref, path)

    def _check_disjoint(self, branches: list[list[dict]], path: str) -> None:
        expanded = [[x for a in b for x in self._expand(a, path, inline=True)] for b in branches]
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
        if ta != {"object"} or "object" not in tb:
            return False
        for name in a.get("required", []):  # a discriminator: a's values for a name it writes, none valid in b
            right = b.get("properties", {}).get(name, unlisted(b, name))
            if right is False:
                return True
            left = a.get("properties", {}).get(name, unlisted(a, name))
            values = [v for v in _finite(left) or [] if self.validator.evolve(schema=left).is_valid(v)]
            if values and not any(self.validator.evolve(schema=right).is_valid(v) for v in values):
                return True
        closed = a.get("additionalProperties", False) is False and "patternProperties" not in a  # writes only its own
        written = set(a.get("properties", {})) | set(a.get("required", []))
        return closed and "$ref" not in a and bool(set(b.get("required", [])) - written)

    # -- alternatives -> nodes xgrammar builds exactly --

    def build(self, schema: Any, path: str) -> Any:
        return self._nodes(self.alternatives(schema, path), path)

    def _nodes(self, alts: list[dict], path: str) -> Any:
        nodes = [n for a in alts if (n := self.node(a, path)) is not None]
        if not nodes:
            raise Unsatisfiable(f"{path}: no value satisfies this schema (as the grammar backend enforces it)")
        return nodes[0] if len(nodes) == 1 else {"anyOf": nodes}

    def node(self, alt: dict, path: str) -> Any:
        if "$ref" in alt:
            return {"$ref": f"#/$defs/{self._define(alt, path)}"}
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

    def _define(self, alt: dict, path: str) -> str:
        """The `$defs` name of a reference's target met with the reference's siblings (none, or those a recursive
        reference kept: the target inlined once there, the recursion inside going on through the plain target)."""
        ref = alt["$ref"]
        target = self._resolve(ref, path)
        rest = {k: v for k, v in alt.items() if k != "$ref"}
        key = (id(target), json.dumps(rest, sort_keys=True, default=str))
        if key in self._unsatisfiable:
            raise Unsatisfiable(f"{path}: no value satisfies {ref!r} (as the grammar backend enforces it)")
        name = self._names.get(key)
        if name is None:
            if len(self._names) >= MAX_DEFS:
                raise GrammarError(f"{path}: more than {MAX_DEFS} definitions once $refs meet their siblings")
            before = len(self._names)
            name = self._names[key] = f"d{before}"
            self._expanding.append(id(target))  # a reference back to it with siblings is defined in turn
            try:
                if rest:
                    self.defs[name] = self._nodes(self.conjoin([rest], self.alternatives(target, ref), ref), ref)
                else:
                    self.defs[name] = self.build(target, ref)
            except Unsatisfiable:
                # the definitions made since may refer to this one: all dropped (the caller drops the branch)
                for dropped in list(self._names)[before:]:
                    self.defs.pop(self._names.pop(dropped), None)
                self._unsatisfiable.add(key)
                raise
            finally:
                self._expanding.pop()
        return name

    def _string(self, alt: dict, path: str) -> dict | None:
        return string_node(alt, path)

    def _integer(self, alt: dict, path: str) -> dict | None:
        return integer_node(alt, path)

    def _number(self, alt: dict, path: str) -> dict | None:
        return number_node(alt, path)

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
            names = self.conjoin(self.alternatives(alt["propertyNames"], path), [{"type": "string"}], path)
            nodes = [n for a in names if (n := self.node(a, f"{path}/propertyNames")) is not None]
            if not nodes:
                return None if required or alt.get("minProperties", 0) > 0 else {**out, "properties": {}}
            out["propertyNames"] = nodes[0] if len(nodes) == 1 else {"anyOf": nodes}
        if (patterns or out["additionalProperties"] is not False) and alt.get("minProperties", 0) > len(required) + 1:
            # names written under additionalProperties / patternProperties may repeat (a parser keeps one)
            raise GrammarError(f"{path}: minProperties beyond the required properties (a name may repeat)")
        for key in ("minProperties", "maxProperties"):
            if key in alt:
                out[key] = alt[key]
        return out


def _finite(schema: Any) -> list[Any] | None:
    """Values that include all `schema` admits, where a `const`/`enum` (or one inside its `allOf`) bounds it."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema or isinstance(schema.get("enum"), list):
        return [schema["const"]] if "const" in schema else schema["enum"]
    found = (_finite(sub) for sub in schema.get("allOf", []))
    return next((values for values in found if values is not None), None)


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
    schema = unique.hold(rewrite.exact(schema))  # (paths in refusals are the rewritten schema's)
    lowering = Lowering(schema)
    out = lowering.build(schema, "#")
    return {**out, "$defs": lowering.defs} if lowering.defs else out


def lower_text(text: str) -> str:
    return json.dumps(lower(json.loads(text)), ensure_ascii=False)
