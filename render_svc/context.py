"""The compact DerenderContext render hands on, so derender never needs the original request."""

from __future__ import annotations

from typing import NamedTuple

from render_svc import sglang_fields
from scaleout.v1 import derender_pb2

PROMPT_TAIL_TOKENS = 8
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class Identity(NamedTuple):
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


def fill(
    context: derender_pb2.DerenderContext,
    request,
    identity: Identity,
    endpoint: derender_pb2.Endpoint,
    prompt_ids,
    prompt_text: str,
    n: int,
    top_logprobs: int | None,
    echo_text: str = "",
    prompt_index: int = 0,
    prompt_logprobs: int | None = None,
) -> None:
    """Fields every endpoint shares, written into `context` (a field of the response); chat adds its tool
    fields with `add_chat_fields`. `prompt_logprobs`: vLLM's, shown on the answer with this many alternatives."""
    context.endpoint = endpoint
    context.model = identity.model
    context.id = identity.id
    context.created = identity.created
    context.tokenizer_fingerprint = identity.fingerprint
    context.skip_special_tokens = request.skip_special_tokens if request.HasField("skip_special_tokens") else True
    context.spaces_between_special_tokens = (
        request.spaces_between_special_tokens if request.HasField("spaces_between_special_tokens") else True
    )
    context.stop.extend(request.stop)
    context.stop_regex.extend(request.stop_regex)
    context.include_stop_str_in_output = request.include_stop_str_in_output
    context.prompt_tail_token_ids.extend(prompt_ids[-PROMPT_TAIL_TOKENS:])
    context.reasoning_parser = identity.reasoning_parser
    context.tool_parser = identity.tool_parser
    context.reasoning_started = reasoning_started(prompt_text)
    context.echo = request.echo
    if request.echo:
        context.prompt_text = echo_text
    context.num_prompt_tokens = len(prompt_ids)
    if request.HasField("stream_options"):
        context.include_usage = request.stream_options.include_usage
        context.continuous_usage_stats = request.stream_options.continuous_usage_stats
    context.prompt_index = prompt_index
    context.n = n
    context.return_token_ids = request.return_token_ids
    context.return_tokens_as_token_ids = request.return_tokens_as_token_ids
    if request.return_token_ids:
        context.prompt_token_ids.extend(prompt_ids)
    if top_logprobs is not None:
        context.top_logprobs = top_logprobs
    context.logprob_token_ids = bool(request.logprob_token_ids)
    if prompt_logprobs is not None:
        context.prompt_logprobs = prompt_logprobs
        if not request.return_token_ids:  # derender scores the prompt's own ids
            context.prompt_token_ids.extend(prompt_ids)
    sglang_fields.apply(context, request)


def add_chat_fields(
    context: derender_pb2.DerenderContext,
    request,
    tool_mode: derender_pb2.ToolChoiceMode,
    tool_function: str,
    template_kwargs: dict,
) -> None:
    context.tools.extend(request.tools)
    context.tool_choice = tool_mode
    context.tool_choice_function = tool_function
    context.parallel_tool_calls = request.parallel_tool_calls if request.HasField("parallel_tool_calls") else True
    if template_kwargs:
        context.chat_template_kwargs.update(template_kwargs)
