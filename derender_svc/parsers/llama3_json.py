"""Llama 3.1-3.3 JSON tool calls: `{"name": ..., "parameters": {...}}` objects (`;`-separated, optionally after
`<|python_tag|>`), also after text and as one JSON list. A JSON object that is not a call stays text; untagged,
an object needs its arguments key to be a call (as in vLLM). After `<|python_tag|>`, Llama 3.1's built-in tool
form, `brave_search.call(query="x")` (its chat template; llama.cpp reads it), is a call of that tool."""

from __future__ import annotations

import re

from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.hermes import json_calls
from derender_svc.parsers.pythonic import parse_calls

PYTHON_TAG = "<|python_tag|>"
_JSON_OPENERS = ('{"', '{ "', "{\n", "[{")
_BUILTIN = re.compile(r"\s*([A-Za-z_]\w*)\s*\.\s*call\s*\(")
_BUILTIN_HEAD = re.compile(r"\s*[A-Za-z_]\w*\s*(?:\.\s*(?:c(?:a(?:l(?:l\s*)?)?)?)?)?")  # could still become one


class Llama3JsonToolParser(BlockToolParser):
    CALLS = (*((opener, ()) for opener in _JSON_OPENERS), (PYTHON_TAG, ()))
    KEEP_OPENER = _JSON_OPENERS
    TRACK = "json"
    VALUE_ENDS = True
    GAP = ";"

    def can_call(self, body: str) -> bool | None:
        if self.opener == PYTHON_TAG and body.strip() and body.lstrip()[0] not in "{[":
            if _BUILTIN.match(body):
                return True
            return None if _BUILTIN_HEAD.fullmatch(body) else False
        return super().can_call(body)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        if not closed:
            return None
        builtin = _BUILTIN.match(body) if opener == PYTHON_TAG else None
        if builtin:  # `tool.call(k=v)` read as the pythonic call `tool(k=v)`
            return parse_calls(builtin.group(1) + "(" + body[builtin.end() :])
        return json_calls(body, keyed=opener != PYTHON_TAG)
