"""gpt-oss harmony output: messages `<|start|>assistant<|channel|>C[ to=R][ <|constrain|>json]<|message|>BODY`
ended by `<|end|>`, `<|call|>` or `<|return|>` (the generation prompt already holds the first `<|start|>assistant`).

Channels: `analysis` is reasoning, `final` the answer, `commentary` preambles (content) and, with a recipient
`functions.NAME`, a tool call whose body is the JSON arguments.

Why not openai-harmony's StreamableParser: it parses token ids of the o200k_harmony vocabulary, which it
downloads on first use (there is no copy on PyPI, and a serving host is often offline); derender's parsers see
text with the harmony tags kept (`markers`), and the header grammar is this small. The reasoning parser passes
function-call messages through as raw harmony text for the tool parser; without a tool parser they show as
text. The tool parser alone treats every non-call message's body as content.
"""

from __future__ import annotations

import re

from derender_svc.parsers.arguments import arguments_json, emit, loads
from derender_svc.parsers.base import StatefulParser, ToolCallDelta
from derender_svc.parsers.scan import split_markers

START, CHANNEL, MESSAGE, CONSTRAIN = "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"
ENDS = ("<|end|>", "<|call|>", "<|return|>")
MARKERS = (START, CHANNEL, MESSAGE, CONSTRAIN, *ENDS)
_RECIPIENT = re.compile(r"to=([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*([^\s<]+)")


class _Harmony(StatefulParser):
    markers = MARKERS

    @classmethod
    def initial_state(cls) -> dict:
        # in: header (reading one) | body (a message's body, or text outside any message when channel is "")
        return {"held": "", "at": "body", "header": "", "channel": "", "to": "", "body": ""}

    @classmethod
    def create(cls, reasoning_started: bool = False):
        return cls()

    def events(self, text: str, final: bool):
        """Yield ("open", raw header) | ("text", piece) | ("close", end marker or "") as `text` allows."""
        text, self.held = self.held + text, ""
        while True:
            if self.at == "header":
                before, marker, text = split_markers(text, (MESSAGE,), final)
                self.header += before
                if marker is None:
                    self.held = text
                    if final:
                        self.header = ""  # a header the output cut off says nothing
                    return
                channel, recipient = _CHANNEL.search(self.header), _RECIPIENT.search(self.header)
                self.channel = channel.group(1) if channel else "final"
                self.to = recipient.group(1) if recipient else ""
                yield "open", self.header + MESSAGE
                self.at, self.header = "body", ""
            else:
                before, marker, text = split_markers(text, (START, CHANNEL, *ENDS), final)
                if before:
                    yield "text", before
                if marker is None:
                    self.held = text
                    if final and self.channel:
                        yield "close", ""
                    return
                if marker in ENDS:
                    yield "close", marker
                    self.channel, self.to = "", ""
                else:
                    if self.channel:  # a new header ends the message without an end tag
                        yield "close", ""
                    self.at, self.header, self.channel, self.to = "header", marker, "", ""

    def calling(self) -> bool:
        return self.to.startswith("functions.")


class HarmonyReasoningParser(_Harmony):
    # for reasoning_ids: the answer starts after the final channel's header
    START, END, ENDS_ON, FORCED = (), (CHANNEL + "final" + MESSAGE,), (), True

    def feed(self, text: str, final: bool) -> tuple[str, str]:
        reasoning, content = [], []
        for kind, piece in self.events(text, final):
            if self.calling():
                content.append(piece)  # the tool parser's to read
            elif kind == "text":
                (reasoning if self.channel == "analysis" else content).append(piece)
        return "".join(reasoning), "".join(content)

    def in_block(self) -> bool:
        """The output so far ends inside an analysis message."""
        return self.channel == "analysis"


class HarmonyToolParser(_Harmony):
    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        content, deltas = [], []
        for kind, piece in self.events(text, final):
            if not self.calling():
                if kind == "text":
                    content.append(piece)
            elif kind == "text":
                self.body += piece
            elif kind == "close":
                value = loads(self.body.strip()) if self.body.strip() else {}
                args = arguments_json(value) if isinstance(value, (dict, list)) else None
                if args is None:
                    content.append(self.body)
                else:
                    deltas += emit(self.calls, (self.to[len("functions.") :], args))
                    self.calls += 1
                self.body = ""
        return "".join(content), deltas

    @classmethod
    def initial_state(cls) -> dict:
        return {**super().initial_state(), "calls": 0}
