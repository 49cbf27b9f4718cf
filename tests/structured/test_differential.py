"""Zero silent under-enforcement, proven the differential way: every schema the engine accepts yields only
completions that `jsonschema` (Draft 2020-12, format checks) finds valid. Random completions are walked from
the compiled grammar itself (tests/structured/differential.py, no model) on whichever backend the engine's rule
picks (xgrammar after our lowering, else llguidance), over a fixed sample of real schemas (JSONSchemaBench,
tests/structured/data/, made by make_sample.py), the constructs xgrammar alone drops and those only llguidance takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine_svc.structured.strings import FORMATS, PATTERNS
from tests.structured.differential import check, tiny

SAMPLE = json.loads((Path(__file__).parent / "data" / "jsonschemabench_sample.json").read_text())
DEFS = {"$defs": {"name": {"type": "string", "maxLength": 4}}}
# What xgrammar builds from one keyword family and would drop the rest of (the issue's probe, and kin).
ENFORCED = {
    "type beside anyOf": {"type": "string", "anyOf": [{"minLength": 2}, {"const": "x"}]},
    "properties beside oneOf": {
        "type": "object",
        "properties": {"id": {"type": "integer", "minimum": 3}},
        "required": ["id"],
        "oneOf": [
            {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
            {"properties": {"kind": {"const": "b"}, "n": {"type": "null"}}, "required": ["kind", "n"]},
        ],
    },
    "$ref with siblings": {
        **DEFS,
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/name", "minLength": 2}},
        "required": ["n"],
    },
    "required of an unlisted name": {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a", "b"],
    },
    "allOf": {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer", "maximum": 5}}, "required": ["a"]},
            {"properties": {"a": {"minimum": 4}, "b": {"type": "boolean"}}, "required": ["b"]},
        ]
    },
    "enum beside type": {"type": "string", "enum": ["a", 1, None, "b"]},
    "length-bounded strings": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 3}},
    "recursion": {
        "$defs": {
            "t": {
                "type": "object",
                "properties": {"c": {"type": "array", "items": {"$ref": "#/$defs/t"}, "maxItems": 2}},
            }
        },
        "$ref": "#/$defs/t",
    },
    "annotations": {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "format": "int64"},
            "s": {"type": "string", "format": "made-up"},
            "x": {"type": "number", "format": "double"},
        },
        "required": ["n", "s", "x"],
    },
    "formats": {"anyOf": [{"type": "string", "format": f} for f in sorted(FORMATS | set(PATTERNS))]},
    "bounds past int64": {"type": "integer", "minimum": -1e30, "maximum": 3.6893488147419103e19},
    # exact rewrites (engine_svc/structured/rewrite.py)
    "oneOf of required lists": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"type": "null"}},
        "oneOf": [{"required": ["a", "c"]}, {"required": ["b"]}, {"required": ["a"]}],
    },
    "if/then/else on a discriminator": {
        "type": "object",
        "properties": {"k": {"enum": ["a", "b", "c"]}, "x": {"type": "integer"}, "y": {"type": "null"}},
        "required": ["k"],
        "if": {"properties": {"k": {"const": "a"}}},
        "then": {"required": ["x"]},
        "else": {"required": ["y"], "properties": {"x": False}},
    },
    "dependentRequired, dependentSchemas": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"type": "null"}},
        "dependentRequired": {"a": ["b"]},
        "dependentSchemas": {"b": {"required": ["c"]}},
    },
    "not required, not {}": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "null"}, "x": {"not": {}}},
        "not": {"required": ["a", "b"]},
        "additionalProperties": True,
    },
    "recursive $ref with siblings": {
        "$defs": {
            "n": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "kids": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/n", "required": ["v"]}},
                },
            }
        },
        "$ref": "#/$defs/n",
        "maxProperties": 1,
    },
    "an unsatisfiable definition others refer to": {
        "$defs": {
            "n": {
                "type": "object",
                "properties": {"m": {"$ref": "#/$defs/m"}, "bad": {"type": "string", "minLength": 3, "maxLength": 1}},
                "required": ["bad"],
            },
            "m": {"type": "object", "properties": {"back": {"$ref": "#/$defs/n"}}},
        },
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/n"}, "y": {"type": "integer"}},
    },
    "fractional multipleOf (as integers)": {
        "type": "object",
        "properties": {
            "price": {"type": "number", "multipleOf": 0.01, "exclusiveMinimum": 0, "maximum": 50},
            "step": {"type": "number", "multipleOf": 0.1},
        },
        "required": ["price", "step"],
    },
    "oneOf on a discriminator, objects open": {
        "type": "object",
        "properties": {"shape": {"type": "string"}, "r": {"type": "number"}, "w": {"type": "number"}},
        "oneOf": [
            {"properties": {"shape": {"enum": ["circle"]}}, "required": ["shape", "r"]},
            {"properties": {"shape": {"enum": ["square"]}}, "required": ["shape", "w"]},
        ],
    },
    "not enum, not type, not allOf of required": {
        "type": "object",
        "properties": {"k": {"type": "string", "not": {"enum": ["a", "ab", "b]"]}}, "t": {"not": {"type": "string"}}},
        "required": ["k", "t"],
        "not": {"allOf": [{"required": ["k"]}, {"required": ["z"]}]},
    },
    "if chain on a free-string discriminator": {
        "type": "object",
        "properties": {"k": {"type": "string", "maxLength": 1}, "a": {"type": "integer"}, "b": {"type": "null"}},
        "required": ["k"],
        "allOf": [
            {
                "if": {"properties": {"k": {"const": "a"}}},
                "then": {"required": ["a"]},
                "else": {"properties": {"a": False}},
            },
            {"if": {"properties": {"k": {"const": "b"}}}, "then": {"required": ["b"]}},
        ],
    },
}
# uniqueItems held exactly (unique.py): distinct values of a small set in its order, else at most one item.
ENFORCED |= {
    "uniqueItems over an enum": {
        "type": "array",
        "items": {"enum": ["a", "b", 1, 1.0, True, None]},
        "uniqueItems": True,
        "minItems": 1,
        "maxItems": 4,
    },
    "uniqueItems over booleans, typeless": {"items": {"type": "boolean"}, "uniqueItems": True},
    "uniqueItems over strings": {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
        "required": ["tags"],
    },
}
# An overlapping oneOf whose branches negate exactly: "one branch and not the others" (rewrite.exclusive).
ENFORCED["oneOf on optional discriminators"] = {
    "type": "object",
    "properties": {"k": {"type": "string"}, "n": {"type": "integer"}},
    "oneOf": [{"properties": {"k": {"const": "a"}}}, {"properties": {"k": {"enum": ["a", "b"]}}, "required": ["n"]}],
}
# What our lowering refuses for xgrammar and llguidance enforces (dual_backend.py's rule picks it).
ON_LLGUIDANCE = {
    "pattern beside maxLength": {"type": "string", "pattern": "^[a-c]+$", "minLength": 2, "maxLength": 3},
    "format beside pattern": {"type": "string", "format": "date", "pattern": "^20"},
    "oneOf of types through $ref": {
        "$defs": {"d": {"type": "string", "pattern": "^[a-z]{1,3}(-[a-z]{1,3})?$"}},
        "oneOf": [{"$ref": "#/$defs/d"}, {"type": "null"}],
    },
    "draft-07 dependencies (rewritten)": {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "^x+$", "maxLength": 3}},
        "dependencies": {"a": ["b"]},
    },
    "a pattern xgrammar mis-compiles": {"type": "string", "pattern": "^[a-z]{1,3}(-[a-z]{1,3})?$"},
    "formats": {
        "type": "object",
        "properties": {
            "f": {"anyOf": [{"type": "string", "format": f} for f in ("uuid", "duration", "date-time", "iri", "ipv4")]},
            "g": {"type": "string", "format": "date", "pattern": "^2", "maxLength": 10},
        },
        "required": ["f", "g"],
    },
}
REFUSED = {
    "overlapping oneOf": ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, "#/oneOf: branches 0 and 1"),
    "not": ({"properties": {"a": {"not": {"type": "string", "minLength": 2}}}}, "#/properties/a: not"),
    "a multipleOf floats do not divide exactly": ({"type": "number", "multipleOf": 1e-5}, "#: multipleOf 1e-05"),
    "a checked format": ({"type": "string", "format": "relative-json-pointer"}, "#: format 'relative-json-pointer'"),
    "uniqueItems over open items, two or more": (
        {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 2},
        "#: uniqueItems",
    ),
    "minProperties made up by unlisted names on llguidance": (
        {
            "type": "object",
            "properties": {"z": {"type": "string", "pattern": "^a$", "maxLength": 1}},
            "required": ["z"],
            "additionalProperties": {"type": "integer"},
            "minProperties": 3,
        },
        "#: minProperties beyond the required properties",
    ),
    "a fractional multipleOf on llguidance": (
        {
            "type": "object",
            "properties": {"x": {"type": "number", "multipleOf": 0.01}, "p": {"pattern": "^a$", "maxLength": 1}},
        },
        "#/properties/x: multipleOf 0.01",
    ),
    "minProperties made up by repeatable names": (
        {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 3},
        "#: minProperties beyond the required properties",
    ),
    "a lookahead": ({"type": "string", "pattern": "^(?!ab)[a-c]{2}$"}, "#: pattern"),
    "an invalid schema": ({"type": "integer", "minimum": "3"}, "#/minimum: not a valid JSON Schema"),
}


@pytest.fixture(scope="module")
def vocab():
    return tiny()


@pytest.mark.parametrize("name", ENFORCED)
def test_enforced_constructs_yield_only_valid_outputs(vocab, name):
    outcome = check(vocab, ENFORCED[name], samples=40)
    assert outcome.accepted, outcome.reason
    assert not outcome.invalid, outcome.invalid[:3]
    assert outcome.valid >= 30


@pytest.mark.parametrize("name", ON_LLGUIDANCE)
def test_what_xgrammar_cannot_take_is_enforced_by_llguidance(vocab, name):
    outcome = check(vocab, ON_LLGUIDANCE[name], samples=40)
    assert outcome.accepted and outcome.backend == "llguidance", (outcome.backend, outcome.reason)
    assert not outcome.invalid, outcome.invalid[:3]
    assert outcome.valid >= 30


@pytest.mark.parametrize("name", REFUSED)
def test_what_cannot_be_enforced_is_refused_naming_path_and_keyword(vocab, name):
    schema, expected = REFUSED[name]
    outcome = check(vocab, schema, samples=1)
    assert not outcome.accepted and expected in outcome.reason, outcome.reason


def test_real_schemas_accepted_are_enforced(vocab):
    """The fixed JSONSchemaBench sample: 0 invalid completions; acceptance does not fall below the sample's."""
    accepted, outputs, invalid = 0, 0, []
    schemas = [(subset, name, schema) for subset, named in SAMPLE.items() for name, schema in named.items()]
    for subset, name, schema in schemas:
        outcome = check(vocab, schema, samples=4)
        accepted += outcome.accepted
        outputs += outcome.valid + len(outcome.invalid)
        invalid += [(subset, name, text[:200]) for text in outcome.invalid]
    assert not invalid, invalid[:5]
    assert accepted >= 64, f"{accepted} of {len(schemas)} accepted"  # 66 of 72 with llguidance (59 on xgrammar alone)
    assert outputs >= 3 * accepted
