"""DeepSeek's DSML tool calls (V3.2 and later), each parameter typed by its own `string` attribute:

- `deepseek_v32` (DeepSeek-V3.2): `<｜DSML｜function_calls>\\n<｜DSML｜invoke name="f">\\n<｜DSML｜parameter
  name="p" string="true">text</｜DSML｜parameter>\\n<｜DSML｜parameter name="n" string="false">5</｜DSML｜parameter>
  \\n</｜DSML｜invoke>\\n</｜DSML｜function_calls>`;
- `deepseek_v4` (DeepSeek-V4): the same inside `<｜DSML｜tool_calls>` (also `<｜DSML｜toolcalls>`, `<｜DSML｜tool>`,
  spellings seen in production, as vLLM accepts);
- `deepseek_v41` (DeepSeek-V4.1): the V4 tags with a space after the DSML bar, `<｜DSML｜ calls>`;
- `gigachat35` (GigaChat 3.5, SGLang): the V4 layout with `｜GCML｜` for the bar, `<｜GCML｜tool_calls>`.
`string="true"` keeps the text as it is; otherwise (or with no attribute) the text is JSON when it parses, else
text (vLLM); the tool's schema has the last word, as in vLLM: text for a string parameter (a value decoded from
JSON goes back to its JSON text), the schema's type for text. Arguments that are one `arguments`/`input` object wrapping the tool's own parameters are unwrapped,
as vLLM does when the tool has no such parameter."""

from __future__ import annotations

import re

from derender_svc.parsers.arguments import dumps, loads
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.schema import convert, parameter_types

BAR = "｜DSML｜"
_NAME = re.compile(r'^\s*name="([^"]*)"\s*>(.*)$', re.DOTALL)


def _parameters(bar: str) -> re.Pattern:
    start, close = re.escape(f"<{bar}parameter"), re.escape(f"</{bar}parameter>")
    head = rf'{start}\s+name="([^"]+)"(?:\s+string="([^"]*)")?\s*>'
    return re.compile(rf"{head}(.*?)(?:{close}|(?={start}\s+name=)|$)", re.DOTALL)


def _calls(sections: tuple[str, ...], close: str, invoke: tuple[str, str]) -> tuple:
    """The block table: each section opener to its closer, and a bare invoke."""
    return (*((section, (close,)) for section in sections), (invoke[0], (invoke[1],)))


class DeepSeekV32ToolParser(BlockToolParser):
    """The section is one block of invokes (all valid, or it is text); an invoke outside one is a call too (vLLM)."""

    INVOKE = (f"<{BAR}invoke", f"</{BAR}invoke>")
    CALLS = _calls((f"<{BAR}function_calls>",), f"</{BAR}function_calls>", INVOKE)
    PARAMETER = _parameters(BAR)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        if opener == self.INVOKE[0]:
            call = self._invoke(body) if closed else None
            return None if call is None else [call]
        pattern = re.compile(rf"\s*{re.escape(self.INVOKE[0])}(.*?){re.escape(self.INVOKE[1])}\s*", re.DOTALL)
        bodies, at = [], 0
        for match in pattern.finditer(body):
            if match.start() != at:
                return None
            bodies.append(match.group(1))
            at = match.end()
        calls = [self._invoke(inner) for inner in bodies]
        valid = [call for call in calls if call is not None]
        return valid if at == len(body) and valid and len(valid) == len(calls) else None

    def _invoke(self, body: str) -> Call | None:
        match = _NAME.match(body)
        if match is None or not match.group(1).strip():
            return None
        name, inner = match.group(1).strip(), match.group(2)
        args = {
            key: value if string == "true" else _json_or_text(value)
            for key, string, value in self.PARAMETER.findall(inner)
        }
        text = dumps(self._typed(name, self._unwrapped(name, args)))
        return None if text is None else (name, text)

    def _unwrapped(self, name: str, args: dict) -> dict:
        """`{"arguments": {...}}` (or `input`) holding the tool's own parameters is those parameters."""
        allowed = set(parameter_types(self.tools, name) or ())
        for wrapper in ("arguments", "input"):
            if allowed and set(args) == {wrapper} and wrapper not in allowed:
                inner = args[wrapper]
                inner = loads(inner) if isinstance(inner, str) else inner
                if isinstance(inner, dict) and set(inner) <= allowed:
                    return inner
        return args

    def _typed(self, name: str, args: dict) -> dict:
        types = parameter_types(self.tools, name) or {}
        for key, value in args.items():
            kind = types.get(key)
            if kind == "string" and not isinstance(value, str) and value is not None:  # null stays null
                args[key] = dumps(value)
            elif kind not in (None, "string") and isinstance(value, str):
                args[key] = convert(value, kind)
        return args


def _json_or_text(value: str):
    parsed = loads(value)
    return value if parsed is None and value.strip() != "null" else parsed


class DeepSeekV4ToolParser(DeepSeekV32ToolParser):
    CALLS = _calls(
        (f"<{BAR}tool_calls>", f"<{BAR}toolcalls>", f"<{BAR}tool>"), f"</{BAR}tool_calls>", DeepSeekV32ToolParser.INVOKE
    )


class DeepSeekV41ToolParser(DeepSeekV32ToolParser):
    INVOKE = (f"<{BAR} invoke", f"</{BAR} invoke>")
    CALLS = _calls((f"<{BAR} calls>",), f"</{BAR} calls>", INVOKE)
    PARAMETER = _parameters(BAR + " ")


GCML = "｜GCML｜"


class GigaChat35ToolParser(DeepSeekV32ToolParser):
    INVOKE = (f"<{GCML}invoke", f"</{GCML}invoke>")
    CALLS = _calls((f"<{GCML}tool_calls>",), f"</{GCML}tool_calls>", INVOKE)
    PARAMETER = _parameters(GCML)
