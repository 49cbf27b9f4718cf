"""Tool calls framed by special tokens, a section of calls after the content:

- `deepseek_v3` (DeepSeek-V3/R1): `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n
  ARGS\\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>`;
- `deepseek_v31` (DeepSeek-V3.1/V3.2-Exp): `...<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...`;
- `kimi_k2` (Kimi-K2): `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>
  ARGS<|tool_call_end|>...<|tool_calls_section_end|>` (also the singular `<|tool_call_section_begin|>`); an id
  without its `:N` counter is no call, and a bare counter (`0`) names the one tool whose parameters cover the
  arguments, as in vLLM; a call the output ends inside counts when its arguments are whole JSON (vLLM and
  SGLang read a truncated call up to the end of the output).
- `kimi_k3` (Kimi-K3, XTML): `<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|><|open|>argument key="p"
  type="string"<|sep|>v<|close|>argument<|sep|>…<|close|>call<|sep|><|close|>tools<|sep|>`; a `string` argument is
  its raw text, any other type JSON (else text), attribute values unescaped (`&quot;`, `&amp;`); the
  `<|open|>response<|sep|>…<|close|>response<|sep|>` wrapper around the content is dropped (vLLM).
The bars are U+FF5C and the spaces U+2581, as in DeepSeek's vocabulary. Both DeepSeek bodies are accepted by
either name, since the tokens are the same; so are the section openers R1's distills write as text
(`<｜tool_calls_begin｜>`, `<｜tool calls begin｜>`, `<｜tool\\_calls\\_begin｜>`, `<｜tool▁calls｜>`) and a call
without its `<｜tool▁call▁begin｜>` (`function<｜tool▁sep｜>…`), as llama.cpp reads them."""

from __future__ import annotations

import re

from derender_svc.parsers.arguments import arguments_json, dumps, loads
from derender_svc.parsers.block import BlockToolParser, Call
from derender_svc.parsers.scan import split_markers
from derender_svc.parsers.schema import parameter_types, tool_names

DS_CALLS = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>")
DS_CALL = ("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>")
DS_SEP = "<｜tool▁sep｜>"
DS_OPENERS = (
    DS_CALLS[0],
    "<｜tool_calls_begin｜>",
    "<｜tool calls begin｜>",
    "<｜tool\\_calls\\_begin｜>",
    "<｜tool▁calls｜>",
)
DS_BARE_CALL = "function" + DS_SEP  # a call whose begin tag the model left out
_V3_BODY = re.compile(r"\s*(\S*?)\s*\n?```(?:json)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
KIMI_SECTION = (("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"),
                ("<|tool_calls_section_end|>", "<|tool_call_section_end|>"))  # fmt: skip
KIMI_CALL = ("<|tool_call_begin|>", "<|tool_call_end|>")
KIMI_ARGS = "<|tool_call_argument_begin|>"
K3_RESPONSE = ("<|open|>response<|sep|>", "<|close|>response<|sep|>")
_K3_ARG = re.compile(r"<\|open\|>\s*argument\s+([^<]*?)<\|sep\|>(.*?)<\|close\|>\s*argument\s*<\|sep\|>", re.DOTALL)
_K3_ATTR = re.compile(r'(\w+)="([^"]*)"')
_KIMI_ID = re.compile(r"^\s*(?:(?:functions\.)?(.+?):)?\d+\s*$", re.DOTALL)


def _json_args(text: str) -> str | None:
    """The arguments as JSON text: an object or array, none at all as {} (vLLM makes such a call too)."""
    if not text.strip():
        return "{}"
    value = loads(text.strip())
    return arguments_json(value) if isinstance(value, (dict, list)) else None


class DeepSeekV3ToolParser(BlockToolParser):
    SECTION = (DS_OPENERS, (DS_CALLS[1],))
    CALLS = ((DS_CALL[0], (DS_CALL[1],)), (DS_BARE_CALL, (DS_CALL[1],)))

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        body = DS_BARE_CALL + body if opener == DS_BARE_CALL else body
        if not closed or DS_SEP not in body:
            return None
        left, right = body.split(DS_SEP, 1)
        v3 = _V3_BODY.match(right) if "```" in right else None
        name, args = (v3.group(1), v3.group(2)) if v3 else (left, right)
        name, args = name.strip(), _json_args(args)
        return [(name, args)] if name and args is not None and "\n" not in name else None


class DeepSeekV31ToolParser(DeepSeekV3ToolParser):
    pass


class KimiK2ToolParser(BlockToolParser):
    SECTION = KIMI_SECTION
    CALLS = ((KIMI_CALL[0], (KIMI_CALL[1],)),)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        if KIMI_ARGS not in body:
            return None
        function_id, args = body.split(KIMI_ARGS, 1)
        if not closed and not args.strip():  # cut off before its arguments: not a call
            return None
        match = _KIMI_ID.match(function_id)
        args = _json_args(args)
        name = (match.group(1) or self._by_arguments(args)) if match else None
        return [(name, args)] if name and args is not None else None

    def _by_arguments(self, args: str | None) -> str | None:
        """The tool a bare counter means: the only one, or the only one whose parameters cover the arguments."""
        names = tool_names(self.tools)
        value = loads(args) if args is not None and len(names) > 1 else None
        if isinstance(value, dict):
            names = [name for name in names if set(value) <= set(parameter_types(self.tools, name) or ())]
        return names[0] if len(names) == 1 and args is not None else None


def _k3_attrs(text: str) -> dict[str, str]:
    return {key: value.replace("&quot;", '"').replace("&amp;", "&") for key, value in _K3_ATTR.findall(text)}


class KimiK3ToolParser(BlockToolParser):
    SECTION = (("<|open|>tools<|sep|>",), ("<|close|>tools<|sep|>",))
    CALLS = (("<|open|>call", ("<|close|>call<|sep|>",)),)

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "unwrap": ""}  # text that may still be a response marker

    @property
    def markers(self) -> tuple[str, ...]:
        return (*super().markers, *K3_RESPONSE)

    def feed(self, text: str, final: bool):
        """The response wrapper's markers are dropped before the calls are looked for."""
        text, self.unwrap, kept = self.unwrap + text, "", []
        while True:
            before, marker, text = split_markers(text, K3_RESPONSE, final)
            kept.append(before)
            if marker is None:
                self.unwrap = text
                break
        return super().feed("".join(kept), final)

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        attrs, sep, inner = body.partition("<|sep|>")
        name = _k3_attrs(attrs).get("tool", "") if closed and sep and attrs[:1].isspace() else ""
        if not name:
            return None
        args = {}
        for raw_attrs, value in _K3_ARG.findall(inner):
            arg = _k3_attrs(raw_attrs)
            parsed = loads(value) if arg.get("type", "string") != "string" else None
            args[arg.get("key", "")] = value if parsed is None and value.strip() != "null" else parsed
        text = dumps(args)
        return None if text is None else [(name, text)]
