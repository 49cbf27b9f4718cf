"""Muse output (`muse`, `musespark1x`; `muse_glimmer`): messages addressed by a recipient,

    <|start|>assistant to=self<|message|>…reasoning…<|eom|>
    <|start|>assistant to=get_weather<|message|><atem:function_calls><atem:invoke name="get_weather">
      <atem:parameter name="city">Paris</atem:parameter></atem:invoke></atem:function_calls><|eom|>
    <|start|>assistant to=user<|message|>…answer…<|eot|>

(the generation prompt ends with `<|start|>assistant`, so the first header is ` to=self<|message|>`; a bare
`<|message|>` has no recipient). A message ends at `<|eom|>`/`<|eot|>` or where the next header starts. Muse Spark:
no recipient and `self` are reasoning, `user` and `commentary` content, `developer` dropped, any other recipient a
tool channel; Glimmer: `self` reasoning, `user` content, no recipient, `commentary` and `developer` dropped (what
vLLM's glimmer profile ends up showing).
A tool channel's `<atem:invoke>`s are the calls, parameter values JSON when they parse (Spark keeps a string
parameter's text); `f.f` names the registered tool `f`. Text outside messages is dropped; an output with no
message at all is content (held to the end: Muse writes a message first). The reasoning parser passes tool messages through framed for the tool parser; the tool
parser alone drops the reasoning bodies (vLLM's puts them in the reasoning field, which a tool parser here has not).
"""

from __future__ import annotations

import json
import re

from derender_svc.parsers.arguments import dumps, emit
from derender_svc.parsers.base import StatefulParser, ToolCallDelta
from derender_svc.parsers.scan import split_markers
from derender_svc.parsers.schema import parameter_types, tool_names

START, MESSAGE, EOM, EOT = "<|start|>", "<|message|>", "<|eom|>", "<|eot|>"
MARKERS = (START, MESSAGE, EOM, EOT)
_RECIPIENT = re.compile(r"to=([A-Za-z0-9_.\-]+)$")
_TAIL = re.compile(r"[^\S\n]*(?:to=[A-Za-z0-9_.\-]*|to|t)?$")  # what may still become a bare header
_BARE = re.compile(r"[^\S\n]*(?:to=[A-Za-z0-9_.\-]+)?$")  # a bare header before `<|message|>`
_INVOKE = re.compile(r"<atem:invoke\b.*?</atem:invoke>", re.DOTALL)
_NAME = re.compile(r'<atem:invoke\b[^>]*?\bname="([^"]+)"')
_PARAM = re.compile(r'<atem:parameter\b[^>]*?\bname="([^"]+)"[^>]*?>(.*?)</atem:parameter>', re.DOTALL)


class _Muse(StatefulParser):
    markers = MARKERS
    REASONING: tuple[str, ...] = ("", "self")  # recipients ("" = none) per role
    CONTENT: tuple[str, ...] = ("user", "commentary")
    DROPPED: tuple[str, ...] = ("developer",)
    BETWEEN = "-"  # the recipient of text outside messages ("-": dropped)

    @classmethod
    def initial_state(cls) -> dict:
        # at: body (to = the message's recipient; the output starts as content) | header (after <|start|>)
        return {"held": "", "at": "body", "to": "user", "header": ""}

    @classmethod
    def create(cls, reasoning_started: bool = False):
        return cls(to="self") if reasoning_started else cls()

    def role(self, to: str) -> str:
        if to in self.REASONING:
            return "reasoning"
        if to in self.CONTENT:
            return "content"
        return "dropped" if to in self.DROPPED or to == "-" else "tool"

    def events(self, text: str, final: bool):
        """Yield ("open", recipient), ("text", piece), ("close", end marker, "" for a new header, None at the output's
        end) as `text` allows."""
        text, self.held = self.held + text, ""
        while True:
            before, marker, text = split_markers(text, MARKERS, final)
            if self.at == "header":
                self.header += before
            else:  # a body; its tail may be the start of a bare header (held in `header` until decided)
                pending, self.header = self.header + before, ""
                if marker == MESSAGE:
                    cut = _BARE.search(pending).start()  # type: ignore[union-attr]
                    pending, self.header = pending[:cut], pending[cut:]
                elif marker is None and not final:
                    cut = _TAIL.search(pending).start()  # type: ignore[union-attr]
                    pending, self.header = pending[:cut], pending[cut:]
                if pending:
                    yield "text", pending
            if marker is None:
                self.held = "" if final else text
                if final and self.at == "body":
                    yield "close", None  # the output's end
                return
            if self.at == "body":
                yield "close", marker if marker in (EOM, EOT) else ""
            if marker == MESSAGE:
                found = _RECIPIENT.search(self.header)
                self.at, self.to, self.header = "body", found.group(1) if found else "", ""
                yield "open", self.to
            elif marker == START:
                self.at, self.header = "header", ""
            else:  # <|eom|> / <|eot|>: text up to the next header is outside any message
                self.at, self.to, self.header = "body", self.BETWEEN, ""


class MuseReasoningParser(_Muse):
    # for reasoning_ids: the answer starts after the user channel's header
    START, END, ENDS_ON, FORCED = (), ("to=user" + MESSAGE,), (), True

    @classmethod
    def initial_state(cls) -> dict:
        # the text before the first message is held: content only if no message ever comes (vLLM)
        return {**super().initial_state(), "to": "?", "lead": ""}

    def feed(self, text: str, final: bool) -> tuple[str, str]:
        reasoning, content = [], []
        for event, value in self.events(text, final):
            role = self.role(self.to)
            if self.to == "?":
                self.lead += value if event == "text" and value else ""
                if event == "close":
                    content.append(self.lead if value is None else "")
                    self.lead = ""
            elif role == "tool":  # passed through framed, for the tool parser
                if event == "open":
                    content.append(f"{START}assistant to={self.to}{MESSAGE}")
                elif event == "text":
                    content.append(value or "")
                else:
                    content.append(value or EOM)
            elif event == "text":
                (reasoning if role == "reasoning" else content if role == "content" else []).append(value or "")
        return "".join(reasoning), "".join(content)

    def in_block(self) -> bool:
        return self.at == "body" and self.role(self.to) == "reasoning"


class MuseToolParser(_Muse):
    BETWEEN = "user"  # behind the reasoning parser, the content it passes on sits between tool messages
    STRINGS = True  # a string parameter keeps its text
    tools: tuple = ()  # the request's tools, for the names and string parameters; not state

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "calls": 0, "body": ""}

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        content, deltas = [], []
        for event, value in self.events(text, final):
            role = self.role(self.to)
            if role != "tool":
                if event == "text" and role == "content":
                    content.append(value or "")
            elif event == "text":
                self.body += value or ""
            elif event == "close":
                calls = self.invokes(self.body)
                if not calls:
                    content.append(self.body)
                for call in calls:
                    deltas += emit(self.calls, call)
                    self.calls += 1
                self.body = ""
        return "".join(content), deltas

    def invokes(self, body: str) -> list[tuple[str, str]]:
        calls = []
        for invoke in _INVOKE.findall(body):
            found = _NAME.search(invoke)
            if found is None:
                continue
            name = found.group(1)
            registered = tool_names(self.tools)
            head, dot, tail = name.partition(".")
            if registered and name not in registered and dot and head == tail and head in registered:
                name = head
            types = (parameter_types(self.tools, name) or {}) if self.STRINGS else {}
            args = {
                key: raw if types.get(key) == "string" and raw != "null" else _json_or_text(raw)
                for key, raw in _PARAM.findall(invoke)
            }
            text = dumps(args)
            if text is not None:
                calls.append((name, text))
        return calls


def _json_or_text(raw: str):
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


class MuseGlimmerReasoningParser(MuseReasoningParser):
    REASONING, CONTENT, DROPPED = ("self",), ("user",), ("", "commentary", "developer")


class MuseGlimmerToolParser(MuseToolParser):
    REASONING, CONTENT, DROPPED = ("self",), ("user",), ("", "commentary", "developer")
    STRINGS = False
