"""Shared pieces of the format case tables: content prefixes, the tool schemas, the table builder, and the
special tags of the token-framed formats."""

from __future__ import annotations

import itertools
import json

from tests.derender.parser_cases import ARGS, NAMES

CONTENT = ["", "Let me check. ", "Sure!\n", "a < b; [1] {x}: "]

TWO = [("a", {"x": 1}), ("b", {"y": [2], "s": "t"})]

_KINDS = {str: "string", bool: "boolean", int: "integer", float: "number", dict: "object", list: "array"}


def _schema(args: dict) -> dict:
    return {k: {"type": _KINDS.get(type(v), "string")} for k, v in args.items()}


TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": props}}}
    for name, props in {
        **{n: {k: v for a in ARGS for k, v in _schema(a).items()} for n in NAMES},
        "a": {"x": {"type": "integer"}},
        "b": {"y": {"type": "array"}, "s": {"type": "string"}},
        "zip": {"code": {"type": "string"}, "n": {"type": "number"}, "on": {"type": "boolean"}},
    }.items()
]

DS = (
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
)

K = ("<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
     "<|tool_calls_section_end|>")  # fmt: skip

H = ("<|start|>assistant", "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|constrain|>")


def _table(render, extra, content=CONTENT) -> list:
    """ARGS x content prefixes, two calls, then the format's own edge cases."""
    cases = []
    for i, (args, lead) in enumerate(itertools.product(ARGS, content)):
        name = NAMES[i % len(NAMES)]
        cases.append((lead + render([(name, args)], i), lead, [(name, args)]))
    cases.append((render(TWO, 0), "", TWO))
    cases.append(("Done. " + render(TWO, 1) + "\n", "Done. ", TWO))
    cases.append((render(TWO, 2) + " after", " after", TWO))
    cases.append(("\n  " + render([("f", {})], 3), "", [("f", {})]))
    cases.append((render([("g", {"k": "v"})], 4) + "\n\n", "", [("g", {"k": "v"})]))
    cases.append(("no tools here", "no tools here", []))
    cases.append(("", "", []))
    return cases + extra


def _j(value, i=0) -> str:
    return json.dumps(value, ensure_ascii=i % 2 == 0)


def _text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _objects(calls, i, key="arguments"):
    return [{"name": n, key: a} for n, a in calls]
