"""Call blocks framed by a vendor's own control tokens, each format described by its class. Calls arrive whole
(`block.py`); a block that does not parse is shown as text."""

from __future__ import annotations

import re

from derender_svc.parsers.arguments import call_from_object, loads
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.schema import convert
from derender_svc.parsers.xml_calls import _TypedCalls

_PLAMO_CALL = re.compile(
    r"\s*<\|plamo:begin_tool_name:plamo\|>(.*?)<\|plamo:end_tool_name:plamo\|>\s*"
    r"<\|plamo:begin_tool_arguments:plamo\|><\|plamo:constrain\|>json<\|plamo:msg\|>(.*?)"
    r"<\|plamo:end_tool_arguments:plamo\|>\s*$",
    re.DOTALL,
)


class Plamo3ToolParser(BlockToolParser):
    """PLaMo 3 (`plamo3`): `<|plamo:begin_tool_requests:plamo|>` then per call `<|plamo:begin_tool_request:plamo|>
    <|plamo:begin_tool_name:plamo|>f<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|>
    <|plamo:constrain|>json<|plamo:msg|>{...}<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|>`."""

    SECTION = (("<|plamo:begin_tool_requests:plamo|>",), ("<|plamo:end_tool_requests:plamo|>",))
    CALLS = (("<|plamo:begin_tool_request:plamo|>", ("<|plamo:end_tool_request:plamo|>",)),)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        match = _PLAMO_CALL.match(body) if closed else None
        args = loads(match.group(2).strip() or "{}") if match else None
        call = call_from_object({"name": match.group(1).strip(), "arguments": args}) if match else None
        return [call] if call is not None and isinstance(args, dict) else None


class CohereCommandToolParser(BlockToolParser):
    """Cohere Command A / Command 4 (`cohere_command3`, `cohere_command4`): `<|START_ACTION|>[{"tool_call_id": "0",
    "tool_name": "f", "parameters": {...}}, ...]<|END_ACTION|>`."""

    CALLS = (("<|START_ACTION|>", ("<|END_ACTION|>",)),)
    TRACK = "json"

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        value = loads(body.strip())
        objects = value if isinstance(value, list) and value else [value]
        renamed = [
            {"name": o.get("tool_name"), "arguments": o.get("parameters")} for o in objects if isinstance(o, dict)
        ]
        calls = [call_from_object(obj) for obj in renamed]
        valid = [call for call in calls if call is not None]
        return valid if valid and len(valid) == len(objects) else None


_CPM_FUNCTION = re.compile(r"""^\s*["']([^"'>]+)["'][^>]*>(.*)$""", re.DOTALL)
_CPM_PARAM = re.compile(r"""<param\s*name=["']([^"'>]+)["']\s*>(.*?)</param>""", re.DOTALL)
_CPM_LAYOUT = re.compile(r"\s*</?arguments>\s*")


class MiniCPM5ToolParser(_TypedCalls):
    """MiniCPM 5 (`minicpm5`): `<function name="f"><param name="p">value</param>...</function>` (the params may sit
    in `<arguments>`); a value is taken as written (or from inside `<![CDATA[…]]>`), and is text for a string
    parameter, else JSON, else a Python literal, else text (vLLM)."""

    CALLS = (("<function name=", ("</function>",)), ("<functionname=", ("</function>",)))

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        match = _CPM_FUNCTION.match(body) if closed else None
        if match is None:
            return None
        name, inner = match.groups()
        if _CPM_LAYOUT.sub("", _CPM_PARAM.sub("", inner)).strip():
            return None
        pairs = [(key, _cdata(value)) for key, value in _CPM_PARAM.findall(inner)]
        if len({key for key, _ in pairs}) < len(pairs):
            return None
        call = self.typed(name, pairs)
        return None if call is None else [call]

    def value(self, text: str, kind: str | None):
        return text if kind == "string" and text != "null" else convert(text, "object")


def _cdata(value: str) -> str:
    return value[9:-3] if value.startswith("<![CDATA[") and value.endswith("]]>") else value
