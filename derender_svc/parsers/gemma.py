"""Gemma-style tool calls, both public forms:

- Gemma 3 prompted function calling (ai.google.dev "Function calling with Gemma"): a ```tool_code fence holding
  Python calls, `[f(a=1)]` or `print(f(a=1))`, parsed as the pythonic format is;
- FunctionGemma: `<start_function_call>call:f{a:<escape>text<escape>,n:3}<end_function_call>`, where
  `<escape>` quotes strings and other values are JSON literals.
"""

from __future__ import annotations

import re

from derender_svc.parsers.arguments import dumps
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.pythonic import parse_calls
from derender_svc.parsers.schema import convert

FENCE, FENCE_END = "```tool_code", "```"
CALL, CALL_END, ESCAPE = "<start_function_call>", "<end_function_call>", "<escape>"
_PRINT = re.compile(r"^\s*print\((.*)\)\s*$", re.DOTALL)
_FG_CALL = re.compile(r"^\s*call:([\w.\-]+)\s*\{(.*)\}\s*$", re.DOTALL)


def function_gemma_args(inner: str) -> dict | None:
    """`a:<escape>x<escape>,n:3` -> {"a": "x", "n": 3} (commas inside <escape> pairs are text)."""
    args, at = {}, 0
    while at < len(inner):
        colon = inner.find(":", at)
        if colon < 0:
            return None if inner[at:].strip() else args
        key = inner[at:colon].strip().strip(",").strip()
        at = colon + 1
        if inner.startswith(ESCAPE, at):
            end = inner.find(ESCAPE, at + len(ESCAPE))
            if end < 0:
                return None
            args[key], at = inner[at + len(ESCAPE) : end], end + len(ESCAPE)
        else:
            end = inner.find(",", at)
            end = len(inner) if end < 0 else end
            args[key], at = convert(inner[at:end].strip(), None, loose=True), end
        if not key:
            return None
        at = at + 1 if inner.startswith(",", at) else at
    return args


class GemmaToolParser(BlockToolParser):
    CALLS = ((FENCE, (FENCE_END,)), (CALL, (CALL_END,)))

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        if not closed:
            return None
        if opener == FENCE:
            match = _PRINT.match(body)
            return parse_calls(match.group(1) if match else body)
        match = _FG_CALL.match(body)
        args = function_gemma_args(match.group(2)) if match else None
        text = dumps(args) if args is not None else None
        return [(match.group(1), text)] if text is not None else None
