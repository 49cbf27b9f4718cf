"""JSON schemas of varied shapes, JSONSchemaBench style (objects nested a few levels, arrays with bounds, enums,
consts, anyOf / oneOf, optional fields, $defs and $ref, string formats and patterns, numbers with bounds), each
with the request that asks for it. Shared by tests/clients/test_structured_outputs.py and bench/structured."""

from __future__ import annotations

S = {"type": "string"}
INT = {"type": "integer"}
N = {"type": "number"}
B = {"type": "boolean"}


def obj(properties: dict, required: list[str] | None = None, **extra) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
        **extra,
    }


def arr(items: dict, low: int = 0, high: int | None = None) -> dict:
    schema = {"type": "array", "items": items, "minItems": low}
    if high is not None:
        schema["maxItems"] = high
    return schema


def short(pattern: str | None = None, length: int = 24) -> dict:
    """A string of at most `length` characters, or one matching `pattern` (xgrammar enforces one or the other)."""
    return {"type": "string", "pattern": pattern} if pattern else {"type": "string", "maxLength": length}


PERSON = obj({"name": short(), "age": {"type": "integer", "minimum": 0, "maximum": 120}})
ADDRESS = obj({"street": short(), "city": short(), "zip": short("^[0-9]{5}$")})
SCHEMAS: list[tuple[str, dict]] = [
    ("a person", PERSON),
    ("a person with an address", obj({"person": PERSON, "address": ADDRESS})),
    ("a city and its population", obj({"city": short(), "population": {"type": "integer", "minimum": 0}})),
    ("a yes or no answer", obj({"answer": {"enum": ["yes", "no"]}})),
    ("a traffic light state", obj({"light": {"enum": ["red", "amber", "green"]}, "blinking": B})),
    ("three colours", obj({"colours": arr(short(length=12), 3, 3)})),
    ("up to four numbers", arr({"type": "integer", "minimum": -100, "maximum": 100}, 1, 4)),
    ("a temperature reading", obj({"celsius": {"type": "number", "minimum": -90, "maximum": 60}})),
    ("a probability", obj({"p": {"type": "number", "minimum": 0, "maximum": 1}})),
    ("a rating out of five", obj({"stars": {"type": "integer", "minimum": 1, "maximum": 5}, "comment": short()})),
    ("an email contact", obj({"email": {"type": "string", "format": "email"}, "name": short()})),
    ("an event date", obj({"title": short(), "date": {"type": "string", "format": "date"}})),
    ("a timestamp", obj({"at": {"type": "string", "format": "date-time"}})),
    (
        "a server address",
        obj(
            {"host": {"type": "string", "format": "ipv4"}, "port": {"type": "integer", "minimum": 1, "maximum": 65535}}
        ),
    ),
    ("a record id", obj({"id": {"type": "string", "format": "uuid"}})),
    ("a web page", obj({"url": {"type": "string", "format": "uri"}, "title": short()})),
    ("a product code", obj({"sku": short("^[A-Z]{3}-[0-9]{4}$")})),
    ("a hex colour", obj({"hex": short("^#[0-9a-f]{6}$")})),
    ("a version number", obj({"version": short("^[0-9]+\\.[0-9]+\\.[0-9]+$")})),
    ("a constant marker", obj({"kind": {"const": "marker"}, "value": INT})),
    (
        "a shape",
        {
            "anyOf": [
                obj({"circle": {"type": "number", "minimum": 0}}),
                obj({"square": {"type": "number", "minimum": 0}}),
            ]
        },
    ),
    ("a value that may be missing", obj({"value": {"anyOf": [INT, {"type": "null"}]}})),
    ("an optional nickname", obj({"name": short(), "nickname": short()}, required=["name"])),
    (
        "a pet",
        {
            "oneOf": [
                obj({"kind": {"const": "cat"}, "lives": {"type": "integer", "minimum": 0, "maximum": 9}}),
                obj({"kind": {"const": "dog"}, "good": B}),
            ]
        },
    ),
    ("a list of people", obj({"people": arr(PERSON, 1, 3)})),
    ("a matrix", obj({"rows": arr(arr({"type": "integer", "minimum": 0, "maximum": 9}, 2, 2), 2, 2)})),
    ("a tree node", obj({"value": INT, "children": arr(obj({"value": INT}), 0, 2)})),
    (
        "a shopping cart",
        obj(
            {
                "items": arr(
                    obj(
                        {
                            "name": short(),
                            "qty": {"type": "integer", "minimum": 1, "maximum": 9},
                            "price": {"type": "number", "minimum": 0},
                        }
                    ),
                    1,
                    3,
                ),
                "total": {"type": "number", "minimum": 0},
            }
        ),
    ),
    (
        "a book",
        obj(
            {
                "title": short(),
                "author": short(),
                "year": {"type": "integer", "minimum": 1000, "maximum": 2100},
                "tags": arr(short(length=10), 0, 3),
            }
        ),
    ),
    (
        "a weather report",
        obj(
            {
                "city": short(),
                "forecast": arr(
                    obj({"day": {"enum": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]}, "high": INT, "low": INT}),
                    1,
                    3,
                ),
            }
        ),
    ),
    ("a point in 3D", obj({"x": N, "y": N, "z": N})),
    ("a boolean flag set", obj({"read": B, "write": B, "execute": B})),
    ("a key and value", obj({"key": short(length=10), "value": {"anyOf": [S, INT, B]}})),
    ("a login form", obj({"username": short("^[a-z][a-z0-9_]{2,15}$"), "remember": B})),
    (
        "an HTTP response",
        obj(
            {
                "status": {"type": "integer", "minimum": 100, "maximum": 599},
                "headers": arr(obj({"name": short(), "value": short()}), 0, 2),
            }
        ),
    ),
    (
        "a calendar slot",
        obj(
            {
                "start": {"type": "string", "format": "time"},
                "minutes": {"type": "integer", "minimum": 15, "maximum": 120},
            }
        ),
    ),
    (
        "a sentiment label",
        obj(
            {
                "text": short(),
                "sentiment": {"enum": ["positive", "neutral", "negative"]},
                "score": {"type": "number", "minimum": -1, "maximum": 1},
            }
        ),
    ),
    ("a translation", obj({"source": short(), "target": short(), "language": {"enum": ["fr", "de", "es", "it"]}})),
    ("a chess move", obj({"from": short("^[a-h][1-8]$"), "to": short("^[a-h][1-8]$")})),
    (
        "a recipe",
        obj(
            {
                "name": short(),
                "ingredients": arr(short(), 1, 4),
                "minutes": {"type": "integer", "minimum": 1, "maximum": 300},
            }
        ),
    ),
    (
        "an invoice line",
        obj({"description": short(), "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 10000}}),
    ),
    ("a graph edge", obj({"from": INT, "to": INT, "weight": {"type": "number", "minimum": 0}})),
    ("a set of two tags", obj({"tags": arr({"enum": ["a", "b", "c", "d"]}, 2, 2)})),
    ("a nested config", obj({"server": obj({"host": short(), "port": INT}), "debug": B})),
    ("a deeply nested value", obj({"a": obj({"b": obj({"c": obj({"d": INT})})})})),
    (
        "a list of coordinates",
        arr(
            obj(
                {
                    "lat": {"type": "number", "minimum": -90, "maximum": 90},
                    "lon": {"type": "number", "minimum": -180, "maximum": 180},
                }
            ),
            1,
            3,
        ),
    ),
    (
        "a referenced address",
        {"$defs": {"addr": ADDRESS}, **obj({"home": {"$ref": "#/$defs/addr"}, "work": {"$ref": "#/$defs/addr"}})},
    ),
    ("a referenced list of people", {"$defs": {"p": PERSON}, **obj({"team": arr({"$ref": "#/$defs/p"}, 1, 2)})}),
    ("a file entry", obj({"path": short("^/[a-z/]+$", 30), "bytes": {"type": "integer", "minimum": 0}, "hidden": B})),
    ("a phone number", obj({"phone": short("^\\+[0-9]{6,12}$")})),
    ("a grade", obj({"student": short(), "grade": {"enum": ["A", "B", "C", "D", "F"]}, "passed": B})),
    ("a polygon", obj({"points": arr(arr(INT, 2, 2), 3, 4)})),
    ("a mixed tuple", {"type": "array", "prefixItems": [S, INT, B], "items": False, "minItems": 3}),
    ("an empty object or a note", {"anyOf": [obj({}), obj({"note": short()})]}),
    (
        "a money amount",
        obj({"currency": short("^[A-Z]{3}$"), "cents": {"type": "integer", "minimum": 0, "maximum": 1000000}}),
    ),
]
