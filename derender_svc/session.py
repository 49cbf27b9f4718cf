"""One request's derender state: its context, resolved settings and one ChoiceProcessor per choice.

The stateful stream keeps a Session in memory; the stateless twin rebuilds it from `state()` on every call;
the unary calls run one Session over every engine message. All three therefore give the same text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from derender_svc import builders
from derender_svc.choice import ChoiceConfig, ChoiceDelta, ChoiceProcessor
from derender_svc.limits import Limits, check_context, check_engine_output
from derender_svc.logprobs import LogprobRenderer, RenderedLogprob
from derender_svc.nonempty import force_content, unforced
from derender_svc.parsers import NONE, REASONING_PARSERS, TOOL_PARSERS
from derender_svc.tokenizer_info import TokenizerInfo
from scaleout.v1 import common_pb2, derender_pb2, engine_pb2
from scaleout_common.errors import quote
from scaleout_common.reasons import Reason, fail
from scaleout_common.response_templates import NAMES as TEMPLATE_PARSERS


@dataclass(frozen=True)
class Defaults:
    """Server-side defaults and bounds every session shares."""

    info: TokenizerInfo
    limits: Limits
    reasoning_parser: str  # "none" or a registered name
    tool_parser: str


def parser_name(name: str, registry: dict, field: str, info: TokenizerInfo | None = None) -> str | None:
    """The registered spelling of `name`, matched ignoring case as SGLang matches (`DeepSeek-R1`); a parser the
    model's response_template declares is refused (`info`) where the model has none."""
    if name.lower() == NONE:
        return None
    name = next((known for known in registry if known.lower() == name.lower()), name)
    if name not in registry:
        raise fail(Reason.UNKNOWN_PARSER, f"unknown parser {quote(name)} (known: {sorted(registry)})", field)
    if info is not None and name in TEMPLATE_PARSERS and info.response_template is None:
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            f"parser {quote(name)} reads the model's response_template: {info.template_problem}",
            field,
        )
    return name


def resolve_config(
    context: derender_pb2.DerenderContext, endpoint: int, defaults: Defaults, streamed: bool = False
) -> ChoiceConfig:
    reasoning = parser_name(
        context.reasoning_parser or defaults.reasoning_parser,
        REASONING_PARSERS,
        "context.reasoning_parser",
        defaults.info,
    )
    tool = fallback = None
    wants_tools = context.tools and context.tool_choice != derender_pb2.TOOL_CHOICE_MODE_NONE
    if endpoint == derender_pb2.ENDPOINT_CHAT and wants_tools:
        if context.tool_choice == derender_pb2.TOOL_CHOICE_MODE_NAMED:
            tool = "named"
        else:
            tool = parser_name(
                context.tool_parser or defaults.tool_parser, TOOL_PARSERS, "context.tool_parser", defaults.info
            )
            if context.tool_choice == derender_pb2.TOOL_CHOICE_MODE_REQUIRED:  # render's JSON array of calls
                tool, fallback = "required", tool
    return ChoiceConfig(
        response_id=context.id,
        skip_special_tokens=context.skip_special_tokens,
        spaces_between_special_tokens=context.spaces_between_special_tokens,
        prompt_tail=tuple(context.prompt_tail_token_ids),
        stop=tuple(context.stop),
        include_stop=context.include_stop_str_in_output,
        reasoning_parser=reasoning,
        reasoning_started=context.reasoning_started,
        tool_parser=tool,
        tool_function=context.tool_choice_function,
        tool_fallback=fallback,
        parallel_tool_calls=context.parallel_tool_calls,
        tools=tuple(context.tools),
        top_logprobs=context.top_logprobs if context.HasField("top_logprobs") else None,
        reasoning_delivery=context.reasoning_delivery,
        streamed=streamed,
        force_content=force_content(context.chat_template_kwargs, reasoning),
        reasoning_unforced=unforced(context.chat_template_kwargs, reasoning),
        return_token_ids=context.return_token_ids,
        tokens_as_ids=context.return_tokens_as_token_ids,
        named_logprobs=context.logprob_token_ids,
        stop_regex=tuple(context.stop_regex),
    )


class Session:
    def __init__(
        self,
        context: derender_pb2.DerenderContext,
        defaults: Defaults,
        endpoint: int = 0,
        state: dict | None = None,
        has_context: bool = True,
        streamed: bool = True,
    ):
        info = defaults.info
        check_context(context, has_context, defaults.limits, info.fingerprint, info.vocab_size)
        self.context, self.defaults = context, defaults
        self.endpoint = endpoint or context.endpoint or derender_pb2.ENDPOINT_CHAT
        self.config = resolve_config(context, self.endpoint, defaults, streamed)
        if streamed and self.endpoint == derender_pb2.ENDPOINT_CHAT and context.HasField("prompt_logprobs"):
            raise fail(  # a chat chunk has no place for them (vLLM refuses them with stream=true)
                Reason.UNSUPPORTED_FIELD,
                "prompt_logprobs are shown on a unary chat answer only",
                "context.prompt_logprobs",
            )
        if state is not None and state.get("i") != context.id:
            raise fail(Reason.INVALID_STATE, "the state belongs to another response id", "state")
        state = state or {}
        _check_state_scalars(state, defaults.limits)
        self.meta = builders.ResponseMeta(
            context.id,
            context.created or state.get("t") or int(time.time()),
            context.model,
            context.prompt_text if context.echo else "",
            tuple(context.prompt_token_ids) if context.return_token_ids else None,
        )
        self.echo_logprobs: list[RenderedLogprob] | None = None  # echo with logprobs: the prompt's, once scored
        self.prompt_logprobs: list[derender_pb2.PromptPositionLogprobs] | None = None  # vLLM's, once scored
        self.prompt_tokens = context.num_prompt_tokens or state.get("p", 0)
        self.cached_tokens = state.get("k", 0)
        self.done = state.get("z", False)
        self.signalled = state.get("g", False)  # stop_generation was sent
        self.stop_generation = False  # this message's answer tells the caller to abort the engine
        try:
            self.choices = {
                int(i): ChoiceProcessor(info, self.config, int(i), s) for i, s in state.get("c", {}).items()
            }
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError):
            raise fail(Reason.INVALID_STATE, "state is not one this service produced", "state") from None

    def _choice(self, index: int) -> ChoiceProcessor:
        if index not in self.choices:
            self.choices[index] = ChoiceProcessor(self.defaults.info, self.config, index)
        return self.choices[index]

    def feed(self, message: engine_pb2.GenerateResponse) -> list[ChoiceDelta]:
        """Deltas for one engine message, in choice order; a `finished` message closes every choice."""
        info = self.defaults.info
        check_engine_output(
            message, self.defaults.limits, info.vocab_size, lambda i: self.choices[i].tokens if i in self.choices else 0
        )
        if message.HasField("prompt"):
            self.prompt_tokens = self.prompt_tokens or message.prompt.num_tokens
            self.cached_tokens = self.cached_tokens or message.prompt.cached_tokens
            if self._echo_scored():
                self.echo_logprobs = self._score_echo(message.prompt.logprobs)
            if self.context.HasField("prompt_logprobs"):
                self.prompt_logprobs = self._prompt_positions(message.prompt.logprobs)
        if message.HasField("usage"):
            self.prompt_tokens = self.prompt_tokens or message.usage.prompt_tokens
            self.cached_tokens = self.cached_tokens or message.usage.cached_tokens
        deltas = {}
        for choice in message.choices:
            delta = self._choice(choice.index).process(choice)
            if delta is not None:
                deltas[choice.index] = _merge(deltas.get(choice.index), delta)
        if message.finished or message.HasField("error"):
            self.done = True
            for index in range(max(self.context.n, 1)):
                self._choice(index)
            for index, processor in self.choices.items():
                delta = processor.process(None, final=True)
                if delta is not None:
                    deltas[index] = _merge(deltas.get(index), delta)
        self.stop_generation = self._engine_can_stop()
        return [deltas[i] for i in sorted(deltas)]

    def _echo_scored(self) -> bool:
        """A completion that echoes its prompt with logprobs: the engine scored the prompt (render asked)."""
        return (
            self.endpoint == derender_pb2.ENDPOINT_COMPLETION
            and self.context.echo
            and bool(self.context.prompt_token_ids)
            and self.config.top_logprobs is not None
        )

    def _scored_prompt(self, scored: common_pb2.TokenLogprobs) -> list[int]:
        """The prompt's ids, once the engine's logprobs are checked to cover all but the first (which has none)."""
        ids = list(self.context.prompt_token_ids)
        if len(scored.logprobs) != len(ids) - 1:
            raise fail(
                Reason.LOGPROBS_MISMATCH,
                f"the prompt's logprobs must cover its {len(ids) - 1} tokens after the first "
                f"(got {len(scored.logprobs)})",
                "engine_output.prompt.logprobs",
            )
        return ids

    def _score_echo(self, scored: common_pb2.TokenLogprobs) -> list[RenderedLogprob]:
        """The echoed prompt's tokens with the engine's logprobs for all but the first, which has none (it rides on
        the engine's first message, with every choice's first tokens)."""
        ids = self._scored_prompt(scored)
        renderer = LogprobRenderer(
            self.defaults.info.token_bytes, self.config.top_logprobs or 0, as_ids=self.config.tokens_as_ids
        )
        return renderer.render(ids[:1], common_pb2.TokenLogprobs(logprobs=[0.0])) + renderer.render(ids[1:], scored)

    def _prompt_positions(self, scored: common_pb2.TokenLogprobs) -> list[derender_pb2.PromptPositionLogprobs]:
        """vLLM's `prompt_logprobs`: the first token's empty, then each position's token and its alternatives."""
        ids = self._scored_prompt(scored)
        if len(scored.ranks) != len(scored.logprobs):
            raise fail(Reason.LOGPROBS_MISMATCH, "the prompt's logprobs need their ranks", "engine_output.prompt.ranks")
        renderer = LogprobRenderer(self.defaults.info.token_bytes, self.context.prompt_logprobs)
        renderer.render(ids[:1], common_pb2.TokenLogprobs(logprobs=[0.0]))  # its bytes lead into the second's text
        return [derender_pb2.PromptPositionLogprobs()] + builders.prompt_positions(
            ids[1:], renderer.render(ids[1:], scored), scored
        )

    def completion(self, deltas: list[ChoiceDelta], usage, flat_base: int | None = None) -> derender_pb2.Completion:
        base = self.flat_base() if flat_base is None else flat_base
        return builders.completion(self.meta, deltas, usage, base, self.echo_logprobs, self.prompt_logprobs)

    def _engine_can_stop(self) -> bool:
        """True once: every choice is done here and a stop string (which the engine cannot see) ended one."""
        if self.signalled or len(self.choices) < max(self.context.n, 1):
            return False
        choices = self.choices.values()
        if all(p.finished for p in choices) and any(p.stop.matched is not None for p in choices):
            self.signalled = True
        return self.signalled

    def usage(self) -> common_pb2.Usage:
        completion_tokens = sum(p.tokens for p in self.choices.values())
        usage = common_pb2.Usage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=self.prompt_tokens + completion_tokens,
            cached_tokens=self.cached_tokens,
        )
        if self.config.reasoning_parser:  # as vLLM: the details come with a reasoning parser
            reasoned = sum(p.counter.count for p in self.choices.values() if p.counter is not None)
            usage.completion_tokens_details.reasoning_tokens = reasoned
        return usage

    def chunk(self, deltas: list[ChoiceDelta], final: bool):
        """The streamed chunk for these deltas (chat or completion), with usage when the context asks."""
        show_usage = self.context.include_usage and (final or self.context.continuous_usage_stats)
        usage = self.usage() if show_usage else None
        deltas = [d for d in deltas if not d.is_empty()]
        if self.endpoint == derender_pb2.ENDPOINT_COMPLETION:
            return self.completion(deltas, usage)
        return builders.chat_chunk(self.meta, deltas, usage)

    def flat_base(self) -> int:
        return self.context.prompt_index * max(self.context.n, 1)

    def state(self) -> dict:
        return {
            "i": self.context.id,
            "t": self.meta.created,
            "p": self.prompt_tokens,
            "k": self.cached_tokens,
            "z": self.done,
            "g": self.signalled,
            "c": {str(i): p.state() for i, p in self.choices.items()},
        }


def _merge(before: ChoiceDelta | None, after: ChoiceDelta) -> ChoiceDelta:
    """Two deltas of one choice in one message (a choice listed twice, or its closing flush)."""
    if before is None:
        return after
    merged = builders.accumulate([before, after])
    merged.first = before.first
    return merged


def _check_state_scalars(state: dict, limits: Limits) -> None:
    """A stateless call's state comes back from the caller: its counts and flags must be what `state()` writes."""

    def count(key: str, top: int) -> bool:
        value = state.get(key, 0)
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= top

    choices = state.get("c", {})
    valid = (
        count("t", 2**32 - 1)
        and count("p", limits.max_reported_tokens)
        and count("k", limits.max_reported_tokens)
        and isinstance(state.get("z", False), bool)
        and isinstance(state.get("g", False), bool)
        and isinstance(choices, dict)
        and all(
            isinstance(i, str) and i.isdigit() and int(i) < limits.max_choices and isinstance(s, dict)
            for i, s in choices.items()
        )
    )
    if not valid:
        raise fail(Reason.INVALID_STATE, "state is not one this service produced", "state")
