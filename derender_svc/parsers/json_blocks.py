"""JSON call objects inside other wrappers:

- `granite` (Granite 3.x: `<|tool_call|>[{...}, ...]`; Granite 4: `<tool_call>{...}</tool_call>`; a bare list at
  the start as vLLM accepts);
- `hunyuan_a13b` (`<tool_calls>[{...}]</tool_calls>`, also Jamba's and Apriel's) and `minimax` (MiniMax-M1:
  `<tool_calls>` then one JSON object per line, `</tool_calls>`): one parser, either layout;
- `qwen2_5_coder` (Qwen2.5-Coder): hermes blocks, and the same objects in `<tools>…</tools>` or a ```json fence;
- the formats of smaller families, each described by its class.
A wrapper whose JSON is not calls is shown as text."""

from __future__ import annotations

import json
import re

from derender_svc.parsers.arguments import call_from_object, dumps, loads
from derender_svc.parsers.base import ToolCallDelta
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.hermes import json_calls
from derender_svc.parsers.scan import drop_tags

BARE = "[{"  # Granite's bare list, recognised only at the start of the output


def json_objects(text: str) -> list[Call] | None:
    """Calls of a JSON list of call objects, or of call objects one after another."""
    text = text.strip()
    if text.startswith("["):
        return json_calls(text)
    decoder, calls, at = json.JSONDecoder(), [], 0
    while at < len(text):
        try:
            value, end = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            return None
        call = call_from_object(value)
        if call is None:
            return None
        calls.append(call)
        at = end
        while at < len(text) and text[at] in " \t\r\n,;":
            at += 1
    return calls or None


class GraniteToolParser(BlockToolParser):
    CALLS = (("<|tool_call|>", ()), ("<tool_call>", ("</tool_call>",)), (BARE, ()))
    KEEP_OPENER = (BARE,)
    TRACK = "json"
    VALUE_ENDS = True
    DROP_AFTER = ("</tool_call>",)

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "lead": True}  # before the first call or text: a bare list may open

    def _openers(self) -> tuple[str, ...]:
        return tuple(opener for opener in super()._openers() if self.lead or opener != BARE)

    def _after_call(self, text: str, final: bool) -> str | None:
        rest = super()._after_call(text, final)
        if rest is not None and self.lead:
            self.lead = False
            if rest.startswith(BARE):  # opened here: later on, a bracketed list in prose is prose
                self._open(BARE)
                return rest[len(BARE) :]
        return rest

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        return json_calls(body) if closed else None


class ToolCallsBlockParser(BlockToolParser):
    CALLS = (("<tool_calls>", ("</tool_calls>",)),)
    TRACK = "json"

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        return json_objects(body)


class NemotronV2ToolParser(ToolCallsBlockParser):
    """Nemotron-Nano v2 (llama.cpp's Nemotron V2): `<TOOLCALL>[{"name": ..., "arguments": {...}}]</TOOLCALL>`."""

    CALLS = (("<TOOLCALL>", ("</TOOLCALL>",)),)


class Qwen25CoderToolParser(BlockToolParser):
    CALLS = (("<tool_call>", ("</tool_call>",)), ("<tools>", ("</tools>",)), ("```json", ("```",)))
    TRACK = "json"

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        return json_objects(body) if closed or opener != "```json" else None


class Phi4MiniToolParser(BlockToolParser):
    """Phi-4-mini (`phi4_mini_json`) and FireFunction v2 (`firefunction_v2`, llama.cpp; it writes a space first):
    `functools[{"name": ..., "arguments": ...}, ...]`."""

    CALLS = (("functools", ()),)
    TRACK = "json"
    VALUE_ENDS = True

    def can_call(self, body: str) -> bool | None:
        return body.startswith("[") if body else None  # the list follows the word at once

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        return json_calls(body) if closed else None


class InternLmToolParser(BlockToolParser):
    """InternLM2/2.5 and Intern-S1 (`internlm`, SGLang's `interns1`): `<|action_start|><|plugin|>\\n{"name": ...,
    "parameters": {...}}<|action_end|>`, one call per action."""

    CALLS = (("<|action_start|><|plugin|>", ("<|action_end|>",)),)
    TRACK = "json"

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        call = call_from_object(loads(body.strip()))
        return None if call is None else [call]


class Granite20bFcToolParser(BlockToolParser):
    """Granite-20B-FunctionCalling (`granite-20b-fc`): `<function_call> {"name": ..., "arguments": ...}`, repeated."""

    CALLS = (("<function_call>", ()),)
    TRACK = "json"
    VALUE_ENDS = True

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        call = call_from_object(loads(body.strip())) if closed else None
        return None if call is None else [call]


class XlamToolParser(GraniteToolParser):
    """xLAM (`xlam`): a JSON list of calls at the start of the output, in a ```` ``` ```` / ```` ```json ```` fence,
    after `[TOOL_CALLS]`, or in hermes blocks (vLLM's places)."""

    CALLS = (
        ("<tool_call>", ("</tool_call>",)),
        ("```json", ("```",)),
        ("```", ("```",)),
        ("[TOOL_CALLS]", ()),
        (BARE, ()),
    )
    DROP_AFTER = ()

    def _track(self, ch: str) -> bool:
        return super()._track(ch) and not dict(self.CALLS)[self.opener]  # a fence or tag ends at its closer


class ApertusToolParser(BlockToolParser):
    """Apertus (`apertus`, SGLang's `apertus2509`): `<|tools_prefix|>[{"f": {args}}, ...]<|tools_suffix|>`, each
    call an object keyed by the function's name."""

    CALLS = (("<|tools_prefix|>", ("<|tools_suffix|>",)),)
    TRACK = "json"

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        value = loads(body.strip())
        objects = value if isinstance(value, list) and value else [value]
        calls = [call_from_object({"name": name, "arguments": args}) for obj in objects if isinstance(obj, dict)
                 for name, args in obj.items()]  # fmt: skip
        valid = [call for call in calls if call is not None]
        whole = all(isinstance(obj, dict) and len(obj) == 1 for obj in objects)
        return valid if whole and valid and len(valid) == len(calls) else None


class GigaChat3ToolParser(BlockToolParser):
    """GigaChat 3 (`gigachat3`): `<|message_sep|>function call<|role_sep|>\\n{"name": ..., "arguments": {...}}` (also
    after `<|function_call|>`); the separator ends the content (vLLM)."""

    CALLS = (
        ("<|message_sep|>function call<|role_sep|>\n", ()),
        ("function call<|role_sep|>\n", ()),
        ("<|function_call|>", ()),
    )
    TRACK = "json"
    VALUE_ENDS = True

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        value = loads(body.strip()) if closed else None
        if not isinstance(value, dict) or not isinstance(value.get("arguments"), dict):
            return None
        call = call_from_object(value, keyed=True)
        return None if call is None else [call]


class SolarOpenToolParser(BlockToolParser):
    """Solar Open (llama.cpp's Solar Open): `<|tool_calls|>` then per call `<|tool_call:begin|>ID<|tool_call:name|>f
    <|tool_call:args|>{...}<|tool_call:end|>`, `<|calls|>` at the end; the message framing around them (`<|content|>`,
    `<|end|>`, `<|begin|>assistant`, `<|flush|>`) is not content."""

    CALLS = (("<|tool_call:begin|>", ("<|tool_call:end|>",)),)
    TRACK = "json"
    FRAMING = ("<|tool_calls|>", "<|calls|>", "<|content|>", "<|end|>", "<|begin|>assistant", "<|flush|>")
    _CALL = re.compile(r"[^<]*<\|tool_call:name\|>\s*([^<\s]+)\s*<\|tool_call:args\|>(.*)$", re.DOTALL)

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "carry": ""}  # a framing tag split over chunks

    @property
    def markers(self) -> tuple[str, ...]:
        return (*super().markers, *self.FRAMING, "<|tool_call:name|>", "<|tool_call:args|>")

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        text, self.carry = drop_tags(self.carry + text, self.FRAMING, final)
        return super().feed(text, final)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        match = self._CALL.match(body)
        value = loads(match.group(2).strip()) if match else None
        args = dumps(value) if isinstance(value, dict) else None
        return None if match is None or args is None else [(match.group(1), args)]


class MiroThinkerToolParser(BlockToolParser):
    """MiroThinker (its template, llama.cpp): `<use_mcp_tool>\\n<server_name>s</server_name>\\n<tool_name>f</tool_name>
    \\n<arguments>\\n{...}\\n</arguments>\\n</use_mcp_tool>`, one or more calls per block (the server is dropped)."""

    CALLS = (("<use_mcp_tool>", ("</use_mcp_tool>",)),)
    TRACK = "json"
    _CALL = re.compile(
        r"\s*(?:<server_name>[^<]*</server_name>\s*)?<tool_name>\s*([^<\s]+)\s*</tool_name>\s*<arguments>(.*?)</arguments>\s*",
        re.DOTALL,
    )

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        calls, at = [], 0
        while at < len(body):
            match = self._CALL.match(body, at)
            value = loads(match.group(2).strip()) if match else None
            args = dumps(value) if isinstance(value, dict) else None
            if match is None or args is None:
                return None
            calls.append((match.group(1), args))
            at = match.end()
        return calls or None
