"""Gemma-style tool calls, both public forms:

- Gemma 3 prompted function calling (ai.google.dev "Function calling with Gemma"): a ```tool_code fence holding
  Python calls, `[f(a=1)]` or `print(f(a=1))`, parsed as the pythonic format is;
- FunctionGemma: `<start_function_call>call:f{a:<escape>text<escape>,n:3}<end_function_call>`, where
  `<escape>` quotes strings and other values are JSON literals;
- Gemma 4 (`gemma4`, its chat template's `format_argument`): `<|tool_call>call:f{a:<|"|>text<|"|>,n:3}<tool_call|>`,
  the same body with `<|"|>` quoting strings.
"""

from __future__ import annotations

import json
import re

from derender_svc.parsers.arguments import dumps
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.pythonic import parse_calls
from derender_svc.parsers.schema import convert, parameter_types

FENCE, FENCE_END = "```tool_code", "```"
CALL, CALL_END, ESCAPE = "<start_function_call>", "<end_function_call>", "<escape>"
GEMMA4_CALL, GEMMA4_CALL_END, GEMMA4_QUOTE = "<|tool_call>", "<tool_call|>", '<|"|>'
_PRINT = re.compile(r"^\s*print\((.*)\)\s*$", re.DOTALL)
_BARE = re.compile(r"call:[\w.\-]+\s*\{")
_BARE_PREFIX = re.compile(r"c(?:a(?:l(?:l(?::[\w.\-]*\s*)?)?)?)?")  # could still become a bare call
_TRAILING_DOT = re.compile(r"[-+]?\d+\.")
_FG_CALL = re.compile(r"^\s*:?call:([\w.\-]+)\s*\{(.*)\}\s*$", re.DOTALL)  # a stray colon first: vLLM's too


class _Reader:
    """Recursive descent over FunctionGemma values: `<escape>text<escape>` (Gemma 4: `<|"|>`), `{key:value,...}`
    (keys bare or quoted), `[value,...]`, JSON strings and literals."""

    def __init__(self, text: str, escape: str = ESCAPE):
        self.text, self.at, self.escape = text, 0, escape
        self.quoted = False  # the last value read was a quoted string

    def skip(self) -> None:
        while self.at < len(self.text) and self.text[self.at] in " \t\r\n":
            self.at += 1

    def value(self):
        self.skip()
        text, at = self.text, self.at
        quote = self.escape
        self.quoted = text.startswith(quote, at)
        if self.quoted:
            end = text.find(quote, at + len(quote))
            if end < 0:
                raise ValueError("unterminated quote")
            self.at = end + len(quote)
            return text[at + len(quote) : end]
        if text.startswith("{", at):
            self.at += 1
            return self.pairs("}")
        if text.startswith("[", at):
            self.at += 1
            items = []
            while not self.closes("]"):
                items.append(self.value())
                self.comma("]")
            return items
        if text.startswith('"', at):
            value, self.at = json.JSONDecoder().raw_decode(text, at)
            return value
        end = at
        while end < len(text) and text[end] not in ",}]":
            end += 1
        self.at = end
        literal = text[at:end].strip()
        if self.escape == GEMMA4_QUOTE:  # as vLLM's Gemma 4 parser reads them: `k:` is "", `108.` a number
            if not literal:
                return ""
            if _TRAILING_DOT.fullmatch(literal):
                return float(literal)
        if not literal:
            raise ValueError("empty value")
        return convert(literal, None, loose=True)

    def pairs(self, close: str) -> dict:
        out = {}
        while not self.closes(close):
            self.skip()
            if self.text.startswith(self.escape, self.at):
                key = self.value()
            elif self.text.startswith('"', self.at):
                key, self.at = json.JSONDecoder().raw_decode(self.text, self.at)
            else:
                colon = self.text.find(":", self.at)
                if colon < 0:
                    raise ValueError("key without value")
                key, self.at = self.text[self.at : colon].strip(), colon
            self.skip()
            if not key or not self.text.startswith(":", self.at):
                raise ValueError("bad key")
            self.at += 1
            out[key] = self.value()
            self.comma(close)
        return out

    def closes(self, close: str) -> bool:
        self.skip()
        if self.at >= len(self.text):
            raise ValueError("unterminated")
        if self.text[self.at] == close:
            self.at += 1
            return True
        return False

    def comma(self, close: str) -> None:
        """A comma, or none before the next item after a quoted value (`a:<escape>x<escape>b:...`: vLLM reads it)."""
        self.skip()
        if self.text.startswith(",", self.at):
            self.at += 1
        elif not self.text.startswith(close, self.at) and not self.quoted:
            raise ValueError("expected a comma")


def function_gemma_args(inner: str, escape: str = ESCAPE) -> dict | None:
    """`a:<escape>x<escape>,n:3` -> {"a": "x", "n": 3}."""
    reader = _Reader(inner + "}", escape)
    try:
        args = reader.pairs("}")
    except (ValueError, RecursionError):
        return None
    return args if reader.at == len(reader.text) else None


class GemmaToolParser(BlockToolParser):
    CALLS = ((FENCE, (FENCE_END,)), (CALL, (CALL_END,)))

    @property
    def markers(self) -> tuple[str, ...]:
        return (*super().markers, ESCAPE)  # a special token that quotes strings: kept when specials are skipped

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        if not closed:
            return None
        if opener == FENCE:
            match = _PRINT.match(body)
            return parse_calls(match.group(1) if match else body)
        return call_body(body, ESCAPE, self.tools)


def call_body(body: str, escape: str, tools=None) -> list[Call] | None:
    """`call:f{...}` -> [(f, JSON arguments)], or None. With `tools` (FunctionGemma) a quoted value is typed by the
    schema, and read as JSON where the schema does not make it a string (`<escape>42<escape>` is 42, as vLLM's)."""
    match = _FG_CALL.match(body)
    if match is None:
        return None
    args = function_gemma_args(match.group(2), escape)
    if args is not None and tools is not None:
        types = parameter_types(tools, match.group(1)) or {}
        args = {k: convert(v, types.get(k), loose=True) if isinstance(v, str) else v for k, v in args.items()}
    text = dumps(args) if args is not None else None
    return [(match.group(1), text)] if text is not None else None


def _bare_end(text: str) -> int | None:
    """Where the bare call at the start of `text` ends (after its closing brace); None while it is open."""
    depth, at = 0, 0
    while at < len(text):
        if text.startswith(GEMMA4_QUOTE, at):
            end = text.find(GEMMA4_QUOTE, at + len(GEMMA4_QUOTE))
            if end < 0:
                return None
            at = end + len(GEMMA4_QUOTE)
            continue
        depth += {"{": 1, "}": -1}.get(text[at], 0)
        at += 1
        if depth == 0 and text[at - 1] == "}":
            return at
    return None


class Gemma4ToolParser(BlockToolParser):
    """Also a bare `call:f{...}` at the start of the content (the model dropped `<|tool_call>`, as right after
    `<channel|>`; vLLM reads it): held until its braces close, then read as the tagged call it stands for."""

    CALLS = ((GEMMA4_CALL, (GEMMA4_CALL_END, "<turn|>")),)  # the model sometimes ends a call with its turn

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "lead": True, "bare": ""}  # lead: nothing but blanks seen yet

    @property
    def markers(self) -> tuple[str, ...]:
        return (*super().markers, GEMMA4_QUOTE)  # a special token that quotes strings: kept when specials are skipped

    def feed(self, text: str, final: bool) -> tuple[str, list]:
        if not self.lead:
            return super().feed(text, final)
        text, self.bare = self.bare + text, ""
        rest = text.lstrip()
        if _BARE.match(rest):
            end = _bare_end(rest)
            if end is None and not final:
                self.bare = text
                return "", []
            self.lead = False
            if end is None:  # cut: what any call the output ends inside shows
                return ("" if self.streamed else text), []
            if call_body(rest[:end], GEMMA4_QUOTE) is not None:
                return super().feed(GEMMA4_CALL + rest[:end] + GEMMA4_CALL_END + rest[end:], final)
        elif not final and (not rest or _BARE_PREFIX.fullmatch(rest)):
            self.bare = text
            return "", []
        self.lead = False
        return super().feed(text, final)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        return call_body(body, GEMMA4_QUOTE) if closed else None
