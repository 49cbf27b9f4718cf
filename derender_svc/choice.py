"""One choice's pipeline: token ids -> text (incremental detokenizer) -> stop strings -> reasoning -> tool calls,
plus logprobs. Work per message is proportional to the message; the whole state is `state()` (JSON-able)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from derender_svc.detokenizer import IncrementalDetokenizer
from derender_svc.logprobs import LogprobRenderer, RenderedLogprob
from derender_svc.nonempty import ForceContent
from derender_svc.parsers import REASONING_PARSERS, make_tool_parser
from derender_svc.parsers.response_template import ResponseTemplateReasoningParser, ResponseTemplateToolParser
from derender_svc.stop_matcher import StopMatcher
from derender_svc.tokenizer_info import TokenizerInfo
from scaleout.v1 import common_pb2, derender_pb2, engine_pb2
from scaleout_common import finish_reasons
from scaleout_common.reasoning_counts import ReasoningCounter


@dataclass(frozen=True)
class ChoiceConfig:
    """The per-request settings every choice of a request shares (from the DerenderContext)."""

    response_id: str
    skip_special_tokens: bool
    spaces_between_special_tokens: bool
    prompt_tail: tuple[int, ...]
    stop: tuple[str, ...]
    include_stop: bool
    reasoning_parser: str | None
    reasoning_started: bool
    tool_parser: str | None
    tool_function: str  # tool_choice naming one function
    parallel_tool_calls: bool
    top_logprobs: int | None
    tools: tuple = ()  # the request's tools (proto messages): schema-typed tool formats read them
    tool_fallback: str | None = None  # under tool_choice "required": the model's own tool parser
    reasoning_delivery: int = derender_pb2.REASONING_DELIVERY_UNSPECIFIED  # streamed, whole or omitted
    streamed: bool = False  # the answer is a stream (DerenderStream, DerenderChunk), not one message
    force_content: bool = False  # chat_template_kwargs.force_nonempty_content (nonempty.py)
    reasoning_unforced: bool = False  # the template kwargs turned a forced family's thinking off (nonempty.py)
    return_token_ids: bool = False  # each delta carries the ids it counts (vLLM's return_token_ids)
    tokens_as_ids: bool = False  # logprobs name tokens `token_id:<id>` (vLLM's return_tokens_as_token_ids)
    named_logprobs: bool = False  # the alternatives are ids the caller named, all shown (vLLM's logprob_token_ids)
    stop_regex: tuple[str, ...] = ()  # SGLang's stop_regex patterns


@dataclass
class ToolCallOut:
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass
class ChoiceDelta:
    index: int
    first: bool = False  # the choice's first answer (carries the role)
    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallOut] = field(default_factory=list)
    logprobs: list[RenderedLogprob] | None = None
    finish_reason: str | None = None
    stop_token_id: int | None = None
    stop_str: str | None = None
    end_token_id: int | None = None  # a "stop" no caller's stop matched: the token that ended it (an EOS)
    token_ids: list[int] | None = None  # with return_token_ids: the ids this delta counts

    def is_empty(self) -> bool:
        """Nothing to send. A delta that only adds token ids is sent (as vLLM sends it): the streamed ids add up to
        the whole output even where text is held back (a partial character, a possible stop string)."""
        return not (
            self.first
            or self.content
            or self.reasoning
            or self.tool_calls
            or self.logprobs
            or self.finish_reason
            or self.token_ids
        )


def tool_call_id(response_id: str, choice: int, call: int) -> str:
    """Stable across the stateful stream, the stateless twin and the unary calls."""
    return "call_" + hashlib.sha256(f"{response_id}/{choice}/{call}".encode()).hexdigest()[:24]


class ChoiceProcessor:
    def __init__(self, info: TokenizerInfo, config: ChoiceConfig, index: int, state: dict | None = None):
        self.config, self.index = config, index
        state = state or {}
        self.tokens = state.get("n", 0)
        self.started = state.get("b", False)
        self.finished = state.get("f", False)
        self.tools_called = state.get("c", False)
        detok = state.get("d") or {"e": list(config.prompt_tail), "p": [], "a": False}
        join_added = None
        if info.spaces_added_tokens and not (config.skip_special_tokens or config.spaces_between_special_tokens):
            join_added = info.added_tokens
        self.detokenizer = IncrementalDetokenizer(
            info.tokenizer, config.skip_special_tokens, detok["e"], detok["p"], join_added, detok["a"]
        )
        stop = state.get("s") or {"h": "", "m": None}
        self.stop = StopMatcher(
            list(config.stop), config.include_stop, stop["h"], stop["m"], config.stop_regex, stop.get("r", "")
        )
        logprobs = state.get("l") or {"b": "", "o": 0}
        self.logprobs = LogprobRenderer(
            info.token_bytes,
            config.top_logprobs or 0,
            bytes.fromhex(logprobs["b"]),
            logprobs["o"],
            config.tokens_as_ids,
            config.named_logprobs,
        )
        self.held_reasoning = state.get("w", "")  # REASONING_DELIVERY_WHOLE: the reasoning not sent yet
        if not isinstance(self.held_reasoning, str):
            raise TypeError("held reasoning")  # a state this service did not write (Session refuses it)
        self.reasoning = None
        if config.reasoning_parser:
            cls = REASONING_PARSERS[config.reasoning_parser]
            unforced = {"forced": False} if config.reasoning_unforced else {}
            self.reasoning = cls(**state["r"]) if "r" in state else cls.create(config.reasoning_started, **unforced)
            if isinstance(self.reasoning, ResponseTemplateReasoningParser):
                self.reasoning.bind(info)
                if "r" not in state:
                    self.reasoning.begin(info.tokenizer.decode(list(config.prompt_tail), skip_special_tokens=False))
        self.counter = None  # the reasoning tokens, counted over the ids (usage)
        if config.reasoning_parser:
            spec = info.counting_spec(config.reasoning_parser, REASONING_PARSERS[config.reasoning_parser])
            spec = replace(spec, forced=False) if config.reasoning_unforced else spec
            self.counter = ReasoningCounter(spec, config.reasoning_started, state.get("k"))
        self.force = None
        if config.force_content and self.reasoning is not None:
            self.force = ForceContent(config.streamed, state.get("e"))
        self.tools = None
        if config.tool_parser:
            self.tools = make_tool_parser(
                config.tool_parser, state.get("t"), config.tool_function, config.tools, config.tool_fallback, info
            )
            self.tools.streamed = config.streamed
            if isinstance(self.tools, ResponseTemplateToolParser) and self.reasoning is None and "t" not in state:
                self.tools.begin(info.tokenizer.decode(list(config.prompt_tail), skip_special_tokens=False))
        tags = {tag for parser in (self.reasoning, self.tools) if parser is not None for tag in parser.markers}
        # parser tags that are special tokens stay in the text when specials are skipped
        self.markers = {i: t for i, t in info.special_tokens.items() if t in tags} if config.skip_special_tokens else {}

    def process(self, choice: engine_pb2.GenerateChoice | None, final: bool = False) -> ChoiceDelta | None:
        """Advance with one engine message for this choice (None with final=True: close it as it is)."""
        if self.finished:
            return None
        delta = ChoiceDelta(self.index, first=not self.started)
        self.started = True
        ids = list(choice.token_ids) if choice is not None else []
        if choice is not None and choice.finish_reason:
            final = True
            delta.finish_reason = finish_reasons.openai_name(choice.finish_reason)
            which = choice.WhichOneof("stop_reason")
            if which == "stop_token_id":
                delta.stop_token_id = choice.stop_token_id
            elif which == "stop_str":
                delta.stop_str = choice.stop_str
            elif choice.finish_reason == common_pb2.FINISH_REASON_STOP and ids:
                delta.end_token_id = ids[-1]
        # The stop token's text is output only when the matched stop is asked for (vLLM's include_stop_str_in_output).
        trim = delta.stop_token_id is not None and not self.config.include_stop
        text_ids = ids[:-1] if trim and ids and ids[-1] == delta.stop_token_id else ids
        text, used = self._text(text_ids, final)
        if self.stop.matched is not None:
            final, ids = True, ids[:used]  # tokens after the one completing the stop string do not count
            delta.finish_reason, delta.stop_token_id, delta.stop_str = "stop", None, self.stop.matched
            delta.end_token_id = None
        self.tokens += len(ids)
        if self.counter is not None:
            self.counter.feed(ids)
        if self.config.return_token_ids:
            delta.token_ids = ids
        if self.config.top_logprobs is not None and choice is not None and choice.logprobs.logprobs:
            delta.logprobs = self.logprobs.render(ids, choice.logprobs)
        content = text
        if self.reasoning is not None:
            reasoning, content = self.reasoning.feed(text, final)
            if self.force is not None:
                reasoning, content = self.force.step(reasoning, content, final, self.reasoning.in_block())
            delta.reasoning = self._deliver(reasoning, bool(content) or final)
        if self.tools is not None:
            content, calls = self.tools.feed(content, final)
            delta.tool_calls = self._calls(calls)
        delta.content = content
        if final:
            self.finished = True
            if self.counter is not None:
                self.counter.finish()
            delta.finish_reason = delta.finish_reason or ""
            # A forced named function ends with "stop", as OpenAI's (and vLLM's) do; any other call: "tool_calls".
            if self.tools_called and delta.finish_reason == "stop" and self.config.tool_parser != "named":
                delta.finish_reason = "tool_calls"
        return delta

    def _text(self, ids: list[int], final: bool) -> tuple[str, int]:
        """(text safe to show, tokens used). With stop strings or patterns, token by token: the match ends at a token."""
        if not self.stop.active:
            return self._detokenize(ids) + (self.detokenizer.flush() if final else ""), len(ids)
        text = []
        for used, token_id in enumerate(ids, 1):
            text.append(self.stop.feed(self._detokenize([token_id]), False))
            if self.stop.matched is not None:
                return "".join(text), used
        if final:
            text.append(self.stop.feed(self.detokenizer.flush(), True))
        return "".join(text), len(ids)

    def _detokenize(self, ids: list[int]) -> str:
        """Text of `ids`; parser tags that are special tokens stay visible to the parsers."""
        if not self.markers or not any(i in self.markers for i in ids):
            return self.detokenizer.step(ids)
        text, start = [], 0
        for at, token_id in enumerate(ids):
            if token_id in self.markers:
                text += [self.detokenizer.step(ids[start : at + 1]), self.markers[token_id]]
                start = at + 1
        return "".join(text) + self.detokenizer.step(ids[start:])

    def _deliver(self, reasoning: str, closed: bool) -> str:
        """The reasoning this delta carries (DerenderContext.reasoning_delivery). WHOLE holds it until the block is
        closed: the parser let content through (the end tag passed) or the answer ended, as SGLang's
        `stream_reasoning: false` buffers it until the end tag."""
        delivery = self.config.reasoning_delivery
        if delivery == derender_pb2.REASONING_DELIVERY_OMITTED:
            return ""
        if delivery == derender_pb2.REASONING_DELIVERY_WHOLE:
            self.held_reasoning += reasoning
            if not closed:
                return ""
            reasoning, self.held_reasoning = self.held_reasoning, ""
        return reasoning

    def _calls(self, calls) -> list[ToolCallOut]:
        out = []
        for call in calls:
            if call.index > 0 and not self.config.parallel_tool_calls:
                continue  # parallel_tool_calls=false: only the first call counts
            self.tools_called = True
            if out and out[-1].index == call.index and call.name is None:
                out[-1].arguments += call.arguments
                continue
            named = call.name is not None
            out.append(
                ToolCallOut(
                    call.index,
                    tool_call_id(self.config.response_id, self.index, call.index) if named else None,
                    call.name,
                    call.arguments,
                )
            )
        return out

    def state(self) -> dict:
        state = {
            "n": self.tokens,
            "b": self.started,
            "f": self.finished,
            "c": self.tools_called,
            "d": self.detokenizer.state(),
            "s": self.stop.state(),
            "l": self.logprobs.state(),
        }
        if self.reasoning is not None:
            state["r"] = self.reasoning.state()
        if self.force is not None:
            state["e"] = self.force.state()
        if self.counter is not None:
            state["k"] = self.counter.state()
        if self.held_reasoning:
            state["w"] = self.held_reasoning
        if self.tools is not None:
            state["t"] = self.tools.state()
        return state
