"""Calls whose arguments are `<arg_key>k</arg_key><arg_value>v</arg_value>` pairs inside a tool-calls group (GLM's
pairs, grouped), values typed by the tool schema (`schema.py`):

- `hy_v3` (Hunyuan HY-V3): `<tool_calls><tool_call>f<tool_sep><arg_key>k</arg_key>\\n<arg_value>v</arg_value>
  </tool_call></tool_calls>`;
- `hy_v4` (Hunyuan HY-V4): the same without `<tool_sep>`, the name ending at the first `<arg_key>`; both read the
  tags of checkpoints that suffix them (`hy_tags.py`);
- `k2_horizon` (K2 Horizon): `<ifm|tool_calls><ifm|tool_call>f<ifm|arg_key>k</ifm|arg_key>[<ifm|arg_type>t
  </ifm|arg_type>]<ifm|arg_value>v</ifm|arg_value></ifm|tool_call></ifm|tool_calls>`, or a JSON
  `{"name": ..., "arguments": {...}}` in the call tags; the request's `tool_call_format` picks one in vLLM, here the
  body does. Values are stripped unless the schema says string; the group is all calls or none (vLLM).
Values are verbatim otherwise (no layout newlines are trimmed, as vLLM). Calls arrive whole (`block.py`)."""

from __future__ import annotations

import re

from derender_svc.parsers.arguments import call_from_object, dumps, loads
from derender_svc.parsers.block import Call
from derender_svc.parsers.hy_tags import Unsuffixed
from derender_svc.parsers.schema import convert, parameter_types
from derender_svc.parsers.xml_calls import _TypedCalls


def _pairs(pattern: re.Pattern, text: str) -> list[tuple[str, ...]] | None:
    """The argument pairs of `text`, or None when anything but pairs (and whitespace) is left over."""
    return None if pattern.sub("", text).strip() else pattern.findall(text)


class HyV3ToolParser(Unsuffixed, _TypedCalls):
    SECTION = (("<tool_calls>",), ("</tool_calls>",))
    CALLS = (("<tool_call>", ("</tool_call>",)),)
    SEP = "<tool_sep>"
    ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        name, sep, rest = body.partition(self.SEP)
        pairs = _pairs(self.ARG, rest) if closed and sep else None
        call = None if pairs is None else self.typed(name, [(key, value) for key, value in pairs])
        return None if call is None else [call]


class HyV4ToolParser(HyV3ToolParser):
    ARG = re.compile(r"<arg_key>(.*?)</arg_key><arg_value>(.*?)</arg_value>", re.DOTALL)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        at = body.find("<arg_key>")
        at = len(body) if at < 0 else at
        return super().parse(opener, body[:at] + self.SEP + body[at:], closed)


_IFM_CALL = re.compile(r"<ifm\|tool_call>(.*?)</ifm\|tool_call>", re.DOTALL)
_IFM_ARG = re.compile(
    r"<ifm\|arg_key>(.*?)</ifm\|arg_key>\s*(?:<ifm\|arg_type>(.*?)</ifm\|arg_type>\s*)?"
    r"<ifm\|arg_value>(.*?)</ifm\|arg_value>",
    re.DOTALL,
)


class K2HorizonToolParser(_TypedCalls):
    CALLS = (("<ifm|tool_calls>", ("</ifm|tool_calls>",)),)  # the group is one block: all its calls or none

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        bodies = _IFM_CALL.findall(body) if closed else []
        calls = [self.ifm_call(inner) for inner in bodies]
        whole = bodies and not _IFM_CALL.sub("", body).strip()
        return [call for call in calls if call is not None] if whole and None not in calls else None

    def ifm_call(self, body: str) -> Call | None:
        text = body.strip()
        if text.startswith("{"):
            value = loads(text)
            args = value.get("arguments", {}) if isinstance(value, dict) else None
            return call_from_object(value) if isinstance(args, dict) else None
        first = body.find("<ifm|arg_key>")
        name = (body if first < 0 else body[:first]).strip()
        pairs = _pairs(_IFM_ARG, body[first:]) if first >= 0 else []
        if not name or "<" in name or any(ch.isspace() for ch in name) or pairs is None:
            return None
        types = parameter_types(self.tools, name) or {}
        args = {}
        for key, kind, value in pairs:
            key = key.strip()
            kind = types.get(key) or kind.strip().split("[", 1)[0].lower() or None
            if not key or key in args:
                return None
            args[key] = convert(value if kind in ("string", None) else value.strip(), kind)
        text = dumps(args)
        return None if text is None else (name, text)
