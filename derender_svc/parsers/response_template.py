"""`hf` and `beam` (vLLM 0.33's ResponseTemplate* and Beam* parsers): the checkpoint declares its output format as a
`response_template` in its tokenizer config (Hugging Face's response templates: `thinking`, `content` and
`tool_calls` regions between declared delimiters). transformers' `ResponseParser` reads the text; this module
routes its events as vLLM's `_ResponseStream` does and keeps what a later chunk needs as JSON-able state.

- The template is model data (TokenizerInfo loads it once, as vLLM validates it for serving: only those three
  fields, `thinking` and `content` plain text; every field optional, an implicit `content` added when every
  field has an opener); `bind` hands it to a parser, never the request's state.
- `hf` as the reasoning parser: `thinking` text is reasoning, `content` text is content, and a `tool_calls`
  region passes whole, delimiters included, into the content (where the `hf` tool parser reads it; vLLM with
  tool parsing off shows the same text). As the tool parser: `thinking` and `content` text are content, a
  `tool_calls` region whose value parses to complete calls gives them (arguments as JSON, typed by the request's
  tool schemas), one that does not is dropped (vLLM logs and drops it).
- Streaming: the state is where the parser stands, not the whole output: the text held back as a possible
  delimiter, and the open region's opener (plus the body of an open `tool_calls` region, parsed when it
  closes). A later chunk replays that into a fresh parser (its events were routed before) and feeds the rest;
  the stream's parser object keeps its transformers parser instead, until it holds LIVE_TEXT characters.
- Beam checkpoints read the same templates; vLLM's `beam` differs only in the grammar it asks of the engine.
- The prompt: vLLM's parser reads it from its last start anchor (a template may pre-write `<think>`); here the
  prompt's last tokens are read so (`begin`), and without an anchor there `reasoning_started` opens `thinking`
  with its first literal opener. Not followed: a `tool_calls` field needs an opener.
"""

from __future__ import annotations

import json

from transformers.utils.chat_parsing import ResponseParser
from transformers.utils.chat_parsing.response_templates import ResponseTemplate

from derender_svc.parsers.base import StatefulParser, ToolCallDelta
from derender_svc.parsers.schema import properties, tool_names
from scaleout_common.response_templates import THINKING, TOOLS

LIVE_TEXT = 4096  # characters a kept parser may hold before the next chunk restarts it from the state


class _Parser(ResponseParser):
    """transformers' parser, also giving a region's span (`span` on its close) and turning a region whose value
    does not parse into a `region_malformed` event, as vLLM's copy does (transformers raises)."""

    opener: tuple[int, int] | None = None  # the open explicit region's opener

    def _open_explicit(self, events, field, m) -> None:
        super()._open_explicit(events, field, m)
        self.opener = (m.start(), m.end())

    def _close_current(self, events) -> None:
        count, field, end = len(events), self._current, self._pos
        start = self.opener[0] if self.opener else end
        self.opener = None
        try:
            super()._close_current(events)
        except (KeyError, TypeError, ValueError):
            events.append({"type": "region_malformed", "field": field})
            self._reset_to_implicit()
        if len(events) > count:
            events[-1]["span"] = (start, end)


def _calls(value) -> list[tuple[str, str]]:
    """(name, arguments JSON) of each call of a `tool_calls` value; none unless every call is complete (vLLM)."""
    calls = []
    for item in value if isinstance(value, list) else [value]:
        function = item.get("function") if isinstance(item, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name or arguments is None:
            return []
        calls.append((name, arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)))
    return calls


def _closer_rest(parser: _Parser) -> str:
    """The rest of the closer the output stopped in, when only the next message's start anchor is missing (the
    stop token came before it), so the region closes as written (vLLM's `_closer_rest`)."""
    if parser._current is None or not parser._opened:
        return ""
    text = parser._buffer[parser.opener[1] if parser.opener else 0 :]
    anchors = parser._spec.start_anchor_literals or []
    for closer in parser._spec.fields[parser._current].close_literals or ():
        for anchor in (a for a in anchors if closer.endswith(a) and closer != a):
            for cut in range(len(closer) - 1, len(closer) - len(anchor) - 1, -1):
                if text.endswith(closer[:cut]):
                    return closer[cut:]
    return ""


class _TemplateParser(StatefulParser):
    TEMPLATE = True  # the model's template, not the class, gives the reasoning tags (TokenizerInfo)
    START: tuple[str, ...] = ()
    END: tuple[str, ...] = ()
    ENDS_ON: tuple[str, ...] = ()
    FORCED = False
    TYPED = False  # tool arguments typed by the request's schemas
    template: ResponseTemplate | None = None  # model data (`bind`), not state
    tools: tuple = ()  # the request's, not state
    streamed = False

    @classmethod
    def initial_state(cls) -> dict:
        # replay: the open region's opener (and an open tool region's body); pending: text held back
        return {"replay": "", "pending": "", "region": "", "calls": 0, "started": False}

    @classmethod
    def create(cls, reasoning_started: bool = False):
        return cls(started=reasoning_started)

    def bind(self, info) -> None:
        """The model's data (a TokenizerInfo): its template; every special token stays in the text (vLLM turns
        skip_special_tokens off for these parsers)."""
        if info.response_template is None:
            raise ValueError(f"this model cannot use a response_template parser: {info.template_problem}")
        self.template = info.response_template
        self.markers = tuple(info.special_tokens.values())

    def _run(self, text: str, final: bool) -> tuple[_Parser, list[dict]]:
        assert self.template is not None, "bind() first"
        parser = getattr(self, "_live", None)  # this object's parser from its last chunk (the stateful stream)
        if parser is None:
            parser = self._restart()
            events = parser.feed(self.pending + text)
        else:
            events = parser.feed(text)
        if final:
            events += parser.feed(_closer_rest(parser)) + parser.finalize()[1]
            self.replay = self.pending = self.region = ""
            self._live = None
            return parser, events
        self._keep(parser)
        return parser, events

    def begin(self, prompt_tail: str) -> None:
        """Stand where the prompt leaves the message, as vLLM's parser reads the prompt: from the last start anchor
        in the prompt's last tokens (without one there, `reasoning_started` decides)."""
        assert self.template is not None, "bind() first"
        if self.template.start_anchor_re.search(prompt_tail) is not None:
            self.started = False
            self._keep(self._parser(prompt_tail))

    def _keep(self, parser: _Parser) -> None:
        """The state that stands where `parser` stands."""
        region = parser._current if parser._current != parser._implicit_name else None
        opener = parser.opener
        if region is None or opener is None:
            self.replay = ""
        elif region == TOOLS:
            self.replay = parser._buffer[opener[0] : parser._pos]
        else:
            self.replay = parser._buffer[opener[0] : opener[1]]
        self.pending, self.region = parser._buffer[parser._pos :], region or ""
        # the live parser keeps all its text: past LIVE_TEXT characters the next chunk restarts from the state
        self._live = parser if parser._pos <= LIVE_TEXT else None

    def _restart(self) -> _Parser:
        """A fresh parser standing where the state says (the replayed text's events were routed before)."""
        assert self.template is not None
        if self.started:  # the prompt opened `thinking`: as if its (first literal) opener were replayed
            thinking = self.template.fields.get(THINKING)
            self.replay, self.started = (thinking.open_literals or [""])[0] if thinking else "", False
        parser = self._parser("")
        if self.replay:
            parser.feed(self.replay)
        return parser

    def _parser(self, prefix: str) -> _Parser:
        """A transformers parser over the model's template (typing arguments by the request's tool schemas)."""
        assert self.template is not None
        names = tool_names(self.tools) if self.TYPED else []
        tools = [{"function": {"name": n, "parameters": {"properties": properties(self.tools, n)}}} for n in names]
        return _Parser(self.template, prefix=prefix, tools=list(tools))


class ResponseTemplateReasoningParser(_TemplateParser):
    def feed(self, text: str, final: bool) -> tuple[str, str]:
        parser, events = self._run(text, final)
        reasoning: list[str] = []
        content: list[str] = []
        for event in events:
            if event["field"] == TOOLS:  # passes whole, for the tool parser (or as text without one)
                if "span" in event:
                    content.append(parser._buffer[event["span"][0] : event["span"][1]])
            elif event["type"] == "region_chunk":
                (reasoning if event["field"] == THINKING else content).append(event["text"])
        return "".join(reasoning), "".join(content)

    def in_block(self) -> bool:
        return self.region == THINKING


class ResponseTemplateToolParser(_TemplateParser):
    TYPED = True

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        _, events = self._run(text, final)
        content: list[str] = []
        deltas: list[ToolCallDelta] = []
        for event in events:
            if event["field"] != TOOLS:
                if event["type"] == "region_chunk":
                    content.append(event["text"])
            elif event["type"] == "region_close":
                for name, arguments in _calls(event["value"]):
                    deltas.append(ToolCallDelta(self.calls, name, arguments))
                    self.calls += 1
        return "".join(content), deltas
