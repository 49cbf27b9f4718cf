"""GLM-5.3-Flash (SGLang's `glm53`, from its Glm53FlashDetector): after `<tool_call>` either
- `name>{json}` (or `name\\n{json}`): no closer, the call runs to the next `<tool_call>`, a `</tool_call>` or the
  end; the arguments are the first JSON value after the name (a scalar is `{"value": x}`), else `{}`; text after
  the value is content;
- `name<arg_key>k</arg_key><arg_value>v</arg_value>…</tool_call>` (GLM's pairs; keys and values stripped, a value
  that reads as JSON is JSON), or the short `<arg_key>k=v</arg_value>` pairs the model also writes.
The name is matched to the request's tools as SGLang does (exact, a `Group/name` or `name:x` part, case-insensitive,
a display name contained in a tool's name, the only tool), and arguments the model unwrapped are put back (an
object whose keys are the items' of a required array parameter it lacks, or a bare list, become that parameter).
Content streams until the first `<tool_call>`; from there the output is held and read whole at its end, since a
call has no closer. A part that names no function is shown as text."""

from __future__ import annotations

import json
import re

from derender_svc.parsers.arguments import dumps, emit
from derender_svc.parsers.base import StatefulParser, ToolCallDelta
from derender_svc.parsers.scan import split_markers
from derender_svc.parsers.schema import parameters, tool_names

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)
_SHORT = re.compile(r"<arg_key>(.*?)</arg_value>", re.DOTALL)


class Glm53ToolParser(StatefulParser):
    mode: str  # text | calls
    held: str
    tools: tuple = ()  # the request's tools; not state
    streamed = False  # a stream's answer; not state

    @classmethod
    def initial_state(cls) -> dict:
        return {"mode": "text", "held": ""}

    @property
    def markers(self) -> tuple[str, ...]:
        return OPEN, CLOSE, "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        text, self.held = self.held + text, ""
        content = ""
        if self.mode == "text":
            content, marker, text = split_markers(text, (OPEN,), final)
            if marker is None:
                self.held = text
                return content, []
            self.mode, text = "calls", OPEN + text
        if not final:
            self.held = text
            return content, []
        calls: list[tuple[str, str]] = []
        for part in text.split(OPEN)[1:]:
            call, rest = self._part(part)
            if call is not None:
                content, calls = content + rest, [*calls, *call]
            elif not (self.streamed and _cut(part)):
                content += OPEN + part  # a stream drops a call it ends inside, as the block parsers do
        return content, [delta for i, call in enumerate(calls) for delta in emit(i, call)]

    def _part(self, part: str) -> tuple[list[tuple[str, str]] | None, str]:
        """([the call] or [] for one naming none of the request's tools, which is dropped as SGLang does; None when
        it is not a call, or one cut off by the end of the output; the text after it) of what follows one
        `<tool_call>`."""
        body, closer, rest = part.partition(CLOSE)
        if "<arg_key>" in body:
            if not closer:
                return None, ""
            name, pairs = body.split("<arg_key>", 1)
            args, after = _pairs("<arg_key>" + pairs), rest
        else:
            head = re.match(r"(.*?)(?:>|\n)", body, re.DOTALL)
            if head is None:
                return None, ""
            name, (args, after) = head.group(1), _json_args(body[head.end() :])
            after += rest
        after = after if after.strip() else ""
        names = tool_names(self.tools)
        name = _resolve(name.strip(), names)
        if name and names and name not in names:
            return [], after
        text = dumps(_rewrap(args, parameters(self.tools, name) or {})) if name and args is not None else None
        return (None, "") if text is None else ([(name, text)], after)


def _cut(part: str) -> bool:
    """`part` is a call the output ended inside (no closer where the pairs need one, or its JSON unfinished)."""
    return (CLOSE not in part and "<arg_key>" in part) or (
        CLOSE not in part and re.match(r"[^>\n]*[>\n]\s*[\[{]", part) is not None
    )


def _pairs(text: str) -> dict:
    pairs = _PAIR.findall(text) or [(*kv.split("=", 1), "")[:2] for kv in _SHORT.findall(text)]
    return {key.strip(): _json_or_text(value.strip()) for key, value in pairs}


def _json_or_text(value: str):
    try:
        return json.loads(value)
    except ValueError:
        return value


def _json_args(text: str):
    """(arguments or None when their JSON is cut off, the text after them) of the JSON value after the name."""
    starts = [at for at in (text.find("["), text.find("{")) if at >= 0]
    if not starts:
        return {}, text
    try:
        value, end = json.JSONDecoder().raw_decode(text, min(starts))
    except ValueError:
        return None, ""
    return value, text[end:]


def _resolve(name: str, names: list[str]) -> str:
    """SGLang's name matching against the request's tools; the name itself when nothing matches."""
    if not name or not names or name in names:
        return name
    parts = [p.strip() for p in name.split("/") if p.strip()] if "/" in name else []
    match = next((p for p in parts if p in names), None) or next(
        (t for t in names for p in parts if t in p or p in t), None
    )
    if match is None and ":" in name and name.split(":")[0].strip() in names:
        match = name.split(":")[0].strip()
    low = name.lower()
    match = match or next(
        (t for t in names if low in (t.lower(), t.lower().replace("get_", "")) or low in t.lower()), None
    )
    return match or (names[0] if len(names) == 1 else name)


def _rewrap(args, params: dict):
    """Arguments the model unwrapped put back under the required array parameter they belong to."""
    props, required = params.get("properties") or {}, params.get("required") or []
    arrays = [k for k in required if isinstance(props.get(k), dict) and props[k].get("type") == "array"]
    if isinstance(args, list):
        return {arrays[0]: args} if arrays else {}
    for key in (k for k in arrays if k not in args):
        items = props[key].get("items") or {}
        fields = set(items.get("properties") or {}) if isinstance(items, dict) else set()
        if fields and args and set(args) <= fields:
            return {key: [args]}
    return args if isinstance(args, dict) else {"value": args}
