"""Llama 3.1-3.3 JSON tool calls: `{"name": ..., "parameters": {...}}` objects (`;`-separated, optionally after
`<|python_tag|>`), also after text and as one JSON list. A JSON object that is not a call stays text; untagged,
an object needs its arguments key to be a call (as in vLLM)."""

from __future__ import annotations

from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.hermes import json_calls

PYTHON_TAG = "<|python_tag|>"
_JSON_OPENERS = ('{"', '{ "', "{\n", "[{")


class Llama3JsonToolParser(BlockToolParser):
    CALLS = (*((opener, ()) for opener in _JSON_OPENERS), (PYTHON_TAG, ()))
    KEEP_OPENER = _JSON_OPENERS
    TRACK = "json"
    VALUE_ENDS = True
    GAP = ";"

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        return json_calls(body, keyed=opener != PYTHON_TAG) if closed else None
