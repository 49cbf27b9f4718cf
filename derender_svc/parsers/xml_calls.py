"""Tool calls whose parameters are XML-ish elements holding text, typed by the tool schema (`schema.py`):

- `qwen3_coder` (Qwen3-Coder, Qwen3-Next): `<tool_call>\\n<function=f>\\n<parameter=p>\\nvalue\\n</parameter>\\n
  </function>\\n</tool_call>`; a bare `<function=...>` counts too, `</parameter>` may be missing (vLLM).
- `seed_oss` (Seed-OSS): the same inside `<seed:tool_call>…</seed:tool_call>`; `mimo` (MiMo): the same, values
  verbatim.
- `glm45` (GLM-4.5/4.6/4.7): `<tool_call>f\\n<arg_key>p</arg_key>\\n<arg_value>value</arg_value>\\n</tool_call>`;
  `iquest_q1` (IQuest Q1, SGLang): the same inside `<iquest_tool_call>…</iquest_tool_call>`; `spark` (Spark 3,
  SGLang): the same with untyped values as text.
- `minimax_m2` (MiniMax-M2): `<minimax:tool_call>\\n<invoke name="f">\\n<parameter name="p">value</parameter>\\n
  </invoke>\\n</minimax:tool_call>`.
- `step3` (Step-3): `<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="f">
  <steptml:parameter name="p">value</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>`;
  values are stripped, text for a string parameter and JSON (else a Python literal, else text) otherwise (SGLang).
- `telechat4` (TeleChat4, SGLang; also `xingchen4`, `xing4_0`): `<tool_call>…</tool_call>` holding hermes' JSON object, or
  `f<param_key>p</param_key><param_value>value</param_value>…` (GLM's pairs renamed; keys and values stripped), or
  a name then an object `f{"p": value}` (its `arguments`/`parameters` member when it has one), or a bare name
  (no arguments), as SGLang's detector reads them; a name with spaces or text between the pairs is not a call.
One newline on each side of a value is layout, not value. Calls arrive whole (`block.py`)."""

from __future__ import annotations

import re

from derender_svc.parsers.arguments import dumps
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.hermes import json_calls
from derender_svc.parsers.schema import convert, parameter_types

# a `<function=` before `</function>` starts the next call (vLLM's qwen3 grammar)
_FUNCTION = re.compile(r"<function=([^>\n]*)>(.*?)(?:</function>|(?=<function=)|$)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.DOTALL)
_GLM_NAME = re.compile(r"\s*([^\s<]+)\s*(.*)$", re.DOTALL)
_GLM_ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)
_INVOKE = re.compile(r'^\s*name=["\']?([^"\'>]*)["\']?\s*>(.*)$', re.DOTALL)
_M2_PARAMETER = re.compile(r'<parameter\s+name=["\']?([^"\'>]*)["\']?\s*>(.*?)(?:</parameter>|$)', re.DOTALL)
_STEP3_CALL = re.compile(
    r'^\s*function\s*<｜tool_sep｜>\s*<steptml:invoke name="([^"]+)">(.*?)</steptml:invoke>\s*$', re.DOTALL
)
_STEP3_PARAMETER = re.compile(r'<steptml:parameter name="([^"]+)">(.*?)</steptml:parameter>', re.DOTALL)
_TC4_NAME = re.compile(r"[^\s<>{}]+")
_TC4_ARG = re.compile(r"<param_key>(.*?)</param_key>\s*<param_value>(.*?)</param_value>", re.DOTALL)


def _unpad(value: str) -> str:
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


class _TypedCalls(BlockToolParser):
    LOOSE = False  # without a schema, decode JSON-looking values

    def typed(self, name: str, pairs: list[tuple[str, str]]) -> Call | None:
        name = name.strip()
        if not name:
            return None
        types = parameter_types(self.tools, name) or {}
        args = {key.strip(): self.value(value, types.get(key.strip())) for key, value in pairs}
        text = dumps(args)
        return None if text is None else (name, text)

    def value(self, text: str, kind: str | None):
        return convert(text, kind, self.LOOSE)


class Qwen3CoderToolParser(_TypedCalls):
    CALLS = (("<tool_call>", ("</tool_call>",)), ("<function=", ("</function>",)))
    DROP_AFTER = ("</tool_call>",)
    UNPAD = True  # one newline on each side of a value is layout

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        source = body if opener != "<function=" else opener + body + ("</function>" if closed else "")
        matches = _FUNCTION.findall(source)
        if not matches or source.strip()[:10] != "<function=":
            return None
        calls = [
            self.typed(
                name, [(key, _unpad(value) if self.UNPAD else value) for key, value in _PARAMETER.findall(inner)]
            )
            for name, inner in matches
        ]
        valid = [call for call in calls if call is not None]
        return valid if len(valid) == len(calls) else None


class SeedOssToolParser(Qwen3CoderToolParser):
    """Seed-OSS: the same calls in `<seed:tool_call>…</seed:tool_call>` (vLLM's seed_oss grammar)."""

    CALLS = (("<seed:tool_call>", ("</seed:tool_call>",)), ("<function=", ("</function>",)))
    DROP_AFTER = ("</seed:tool_call>",)


class MiMoToolParser(Qwen3CoderToolParser):
    """Xiaomi MiMo: Qwen3-Coder's calls with each value verbatim, newlines included (vLLM's mimo)."""

    UNPAD = False


class Glm45ToolParser(_TypedCalls):
    CALLS = (("<tool_call>", ("</tool_call>",)),)
    LOOSE = True

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        match = _GLM_NAME.match(body)
        if not closed or match is None:
            return None
        name, rest = match.groups()
        pairs = _GLM_ARG.findall(rest)
        if _GLM_ARG.sub("", rest).strip():
            return None
        call = self.typed(name, [(key, value) for key, value in pairs])
        return None if call is None else [call]


class IQuestQ1ToolParser(Glm45ToolParser):
    CALLS = (("<iquest_tool_call>", ("</iquest_tool_call>",)),)


class Spark3ToolParser(Glm45ToolParser):
    """Spark 3 (SGLang's `spark`): GLM's calls; a value of a parameter the schema does not type is text, and a
    boolean may be written `1`/`0`."""

    LOOSE = False

    def value(self, text: str, kind: str | None):
        if kind in ("boolean", "bool") and text.strip() in ("1", "0"):
            return text.strip() == "1"
        return super().value(text, kind)


class MiniMaxM2ToolParser(_TypedCalls):
    SECTION = (("<minimax:tool_call>",), ("</minimax:tool_call>",))
    CALLS = (("<invoke", ("</invoke>",)),)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        match = _INVOKE.match(body)
        if match is None:
            return None
        name, inner = match.groups()
        call = self.typed(name, [(key, _unpad(value)) for key, value in _M2_PARAMETER.findall(inner)])
        return None if call is None else [call]


class DotsToolParser(MiniMaxM2ToolParser):
    """dots.llm (`dots`): MiniMax-M2's invokes inside `<dots_function_call>…</dots_function_call>`."""

    SECTION = (("<dots_function_call>",), ("</dots_function_call>",))


class Step3ToolParser(_TypedCalls):
    LOOSE = True
    SECTION = (("<｜tool_calls_begin｜>",), ("<｜tool_calls_end｜>",))
    CALLS = (("<｜tool_call_begin｜>", ("<｜tool_call_end｜>",)),)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        match = _STEP3_CALL.match(body) if closed else None
        if match is None:
            return None
        name, inner = match.groups()
        call = self.typed(name, [(key, value.strip()) for key, value in _STEP3_PARAMETER.findall(inner)])
        return None if call is None else [call]

    def value(self, text: str, kind: str | None):
        return text if kind == "string" and text != "null" else convert(text, kind or "object")


class TeleChat4ToolParser(_TypedCalls):
    CALLS = (("<tool_call>", ("</tool_call>",)),)
    LOOSE = True

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        body = body.strip()
        if not closed or not body:
            return None
        if body.startswith("{"):
            return json_calls(body)
        at = body.find("<param_key>")
        if at >= 0:
            name, pairs = body[:at].strip(), body[at:]
            if not _TC4_NAME.fullmatch(name) or _TC4_ARG.sub("", pairs).strip():
                return None
            call = self.typed(name, [(key.strip(), value.strip()) for key, value in _TC4_ARG.findall(pairs)])
            return None if call is None else [call]
        brace = body.find("{")
        name = (body[:brace] if brace >= 0 else body).strip()
        if not _TC4_NAME.fullmatch(name):
            return None
        value = convert(body[brace:], "object") if brace >= 0 else {}
        if isinstance(value, dict):
            value = next((value[k] for k in ("arguments", "parameters") if k in value), value)
        text = dumps(value) if isinstance(value, dict) else None
        return None if text is None else [(name, text)]
