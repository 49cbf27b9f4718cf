"""Inkling output (`inkling`): typed blocks, each a special token, in any order and repeated:

    <|message_model|>[header]<|content_thinking|>…reasoning…<|end_message|>
    <|message_model|><|content_text|>…answer…<|end_message|>
    <|message_model|>f<|content_invoke_tool_json|>{"name":"f","args":{...}}<|end_message|>

The generation prompt ends with `<|message_model|>`, so the output starts in a header. A header (the optional
function name) is not content; `<|content_model_end_sampling|>` ends a block like `<|end_message|>`; the raw-tool
and tool-error blocks show as text (vLLM's inkling grammar). The reasoning parser passes tool blocks through as
raw text for the tool parser (without one they show as text); the tool parser alone drops the thinking blocks
(as vLLM's does) and reads the other blocks' text as content, starting outside any block.
"""

from __future__ import annotations

from derender_svc.parsers.arguments import arguments_json, emit, loads
from derender_svc.parsers.base import StatefulParser, ToolCallDelta
from derender_svc.parsers.scan import split_markers

MESSAGE, END, END_SAMPLING = "<|message_model|>", "<|end_message|>", "<|content_model_end_sampling|>"
THINKING, TOOL = "<|content_thinking|>", "<|content_invoke_tool_json|>"
KINDS = {
    THINKING: "thinking",
    "<|content_text|>": "text",
    "<|content_invoke_tool_text|>": "text",
    "<|content_tool_error|>": "text",
    TOOL: "tool",
}
MARKERS = (MESSAGE, END, END_SAMPLING, *KINDS)


class _Inkling(StatefulParser):
    markers = MARKERS
    HEADER_FIRST = True

    @classmethod
    def initial_state(cls) -> dict:
        # kind: header | thinking | text | tool | "" (outside any block: content)
        return {"held": "", "kind": "header" if cls.HEADER_FIRST else "", "header": "", "body": ""}

    @classmethod
    def create(cls, reasoning_started: bool = False):
        return cls(kind="thinking") if reasoning_started else cls()

    def events(self, text: str, final: bool):
        """Yield ("text", kind, piece) and ("close", kind, end marker or "") as `text` allows."""
        text, self.held = self.held + text, ""
        while True:
            markers = (END, END_SAMPLING) if self.kind == "tool" else MARKERS
            before, marker, text = split_markers(text, markers, final)
            if self.kind == "header":
                self.header += before
            elif before:
                yield "text", self.kind, before
            if marker is None:
                self.held = text
                if final and self.kind in ("tool", "header"):
                    yield "close", self.kind, ""
                return
            if marker in KINDS:
                self.kind, self.header = KINDS[marker], ""
                if self.kind == "tool":
                    yield "text", "tool", marker
            elif marker == MESSAGE:
                self.kind, self.header = "header", ""
            else:
                yield "close", self.kind, marker
                self.kind = ""

    def header_text(self) -> str:
        """A header that an end marker closed is content (vLLM); one a block opener closed is not."""
        text, self.header = self.header, ""
        return text


class InklingReasoningParser(_Inkling):
    # for reasoning_ids: everything before the first text block is reasoning or framing; a tool block ends it
    START, END, ENDS_ON, FORCED = (), ("<|content_text|>",), (TOOL,), True

    def feed(self, text: str, final: bool) -> tuple[str, str]:
        reasoning, content = [], []
        for event, kind, piece in self.events(text, final):
            if event == "close":
                content.append(self.header_text() if kind == "header" else piece if kind == "tool" else "")
            elif kind == "thinking":
                reasoning.append(piece)
            else:
                content.append(piece)
        return "".join(reasoning), "".join(content)

    def in_block(self) -> bool:
        return self.kind == "thinking"


class InklingToolParser(_Inkling):
    HEADER_FIRST = False

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "calls": 0}

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        content, deltas = [], []
        for event, kind, piece in self.events(text, final):
            if kind == "header":
                content.append(self.header_text())
            elif kind != "tool":
                content.append(piece if event == "text" and kind != "thinking" else "")
            elif event == "text":
                self.body += piece
            else:
                call = _call(self.body[len(TOOL) :])
                if call is None:
                    content.append(self.body + piece)
                else:
                    deltas += emit(self.calls, call)
                    self.calls += 1
                self.body = ""
        return "".join(content), deltas


def _call(body: str) -> tuple[str, str] | None:
    value = loads(body.strip())
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        return None
    key = next((k for k in ("args", "arguments", "parameters") if k in value), None)
    args = arguments_json(value[key] if key else None)
    return None if args is None else (value["name"], args)
