"""The compact DerenderContext render hands on, so derender never needs the original request."""

from __future__ import annotations

from dataclasses import dataclass

from scaleout.v1 import derender_pb2

PROMPT_TAIL_TOKENS = 8
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


@dataclass(frozen=True)
class Identity:
    """Per-request identity shared by every prompt of a request."""

    id: str  # "chatcmpl-..." / "cmpl-..."
    created: int
    model: str
    fingerprint: str
    reasoning_parser: str = ""
    tool_parser: str = ""


def reasoning_started(prompt_text: str) -> bool:
    """The prompt ends inside a reasoning block the template (or the caller) opened."""
    return prompt_text.rfind(THINK_OPEN) > prompt_text.rfind(THINK_CLOSE)


def build(request, identity: Identity, endpoint: int, prompt_ids, prompt_text: str, n: int,
          top_logprobs: int | None, echo_text: str = "", prompt_index: int = 0) -> derender_pb2.DerenderContext:
    """Fields every endpoint shares; chat adds its tool fields with `add_chat_fields`."""
    context = derender_pb2.DerenderContext(
        endpoint=endpoint,
        model=identity.model,
        id=identity.id,
        created=identity.created,
        tokenizer_fingerprint=identity.fingerprint,
        skip_special_tokens=request.skip_special_tokens if request.HasField("skip_special_tokens") else True,
        spaces_between_special_tokens=(
            request.spaces_between_special_tokens if request.HasField("spaces_between_special_tokens") else True
        ),
        stop=request.stop,
        include_stop_str_in_output=request.include_stop_str_in_output,
        prompt_tail_token_ids=prompt_ids[-PROMPT_TAIL_TOKENS:],
        reasoning_parser=identity.reasoning_parser,
        tool_parser=identity.tool_parser,
        reasoning_started=reasoning_started(prompt_text),
        echo=request.echo,
        prompt_text=echo_text if request.echo else "",
        num_prompt_tokens=len(prompt_ids),
        include_usage=request.stream_options.include_usage,
        continuous_usage_stats=request.stream_options.continuous_usage_stats,
        prompt_index=prompt_index,
        n=n,
    )
    if top_logprobs is not None:
        context.top_logprobs = top_logprobs
    return context


def add_chat_fields(context: derender_pb2.DerenderContext, request, tool_mode: int, tool_function: str,
                    template_kwargs: dict) -> None:
    context.tools.extend(request.tools)
    context.tool_choice = tool_mode
    context.tool_choice_function = tool_function
    context.parallel_tool_calls = request.parallel_tool_calls if request.HasField("parallel_tool_calls") else True
    if template_kwargs:
        context.chat_template_kwargs.update(template_kwargs)
