"""Pythonic tool calls (Llama 3.2/4, ToolACE, functionary): a Python list of calls, `[f(a=1), g(b="x")]`,
possibly after text and inside Llama 4's `<|python_start|>...<|python_end|>`.

The list is read whole (calls arrive when it closes) and each element parsed with `ast`, literals only. An
element that is not a keyword-only call of literals, or whose values JSON cannot carry (`1e999`), is dropped;
a list with no valid call is text. A closer ends the brackets it left open (`[f(a=1), g(b=2]`), and a list the
output ends inside keeps its complete elements (an unclosed string swallows only its own element). A `[` not followed by `name(` is decided to be text at once."""

from __future__ import annotations

import ast
import re

from derender_svc.parsers.arguments import dumps
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.hermes import json_calls

START, END = "<|python_start|>", "<|python_end|>"
_CALL_START = re.compile(r"\s*\[?\s*[A-Za-z_]\w*\s*\(")
_HEAD = re.compile(r"\s*\[?\s*(?:[A-Za-z_]\w*\s*)?")


def parse_call(node: ast.AST) -> Call | None:
    """(name, JSON arguments) of `f(a=1, b="x")`, or None when it is not such a call."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
        return None
    try:
        arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if None in arguments:  # **kwargs
        return None
    text = dumps(arguments)
    return None if text is None else (node.func.id, text)


def split_elements(source: str) -> list[str]:
    """Top-level comma-separated elements of `[a, b]` (quote and bracket aware), for a list `ast` rejects."""
    inner = source.strip()
    inner = inner[1:-1] if inner.startswith("[") and inner.endswith("]") else inner.lstrip("[")
    parts, depth, quote, escape, start = [], 0, "", False, 0
    for at, ch in enumerate(inner):
        if quote:
            escape, quote = (False, quote) if escape else (ch == "\\", "" if ch == quote else quote)
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:at])
            start = at + 1
    return [*parts, inner[start:]]


def parse_calls(source: str) -> list[Call] | None:
    try:
        tree = ast.parse(source.strip(), mode="eval").body
        nodes = tree.elts if isinstance(tree, ast.List) else [tree]
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        nodes = []
        for element in split_elements(source):
            try:
                nodes.append(ast.parse(element.strip(), mode="eval").body)
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                continue
    calls = [call for call in map(parse_call, nodes) if call is not None]
    return calls or None


class PythonicToolParser(BlockToolParser):
    CALLS = (("[", ()), (START, (END,)))
    KEEP_OPENER = ("[",)
    TRACK = "python"
    VALUE_ENDS = True
    DROP_AFTER = (END,)

    def can_call(self, body: str) -> bool | None:
        if _CALL_START.match(body):
            return True
        return None if _HEAD.fullmatch(body) else False

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        if closed:
            return parse_calls(body)
        # the output ended inside the list (an unclosed string, a cut): its complete elements still count
        complete = split_elements(body)[:-1] if opener == "[" else []
        return parse_calls("[" + ",".join(complete) + "]") if complete else None


class Lfm2ToolParser(PythonicToolParser):
    """LFM2 / LFM2.5 (`lfm2`): the list inside `<|tool_call_start|>…<|tool_call_end|>` only; a JSON list of call
    objects there too (llama.cpp's LFM2 with JSON tools)."""

    CALLS = (("<|tool_call_start|>", ("<|tool_call_end|>",)),)
    DROP_AFTER = ("<|tool_call_end|>",)

    def can_call(self, body: str) -> bool | None:
        return True if body.lstrip().startswith("[{") else super().can_call(body)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        if body.lstrip().startswith("[{"):
            return json_calls(body) if closed else None
        return super().parse(opener, body, closed)


class Olmo3ToolParser(PythonicToolParser):
    """OLMo 3 (`olmo3`): calls one per line, without brackets, inside `<function_calls>…</function_calls>`."""

    CALLS = (("<function_calls>", ("</function_calls>",)),)
    VALUE_ENDS = False
    DROP_AFTER = ()

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        lines = [line.strip() for line in body.splitlines() if line.strip()]
        return parse_calls("[" + ", ".join(lines) + "]") if closed and lines else None
