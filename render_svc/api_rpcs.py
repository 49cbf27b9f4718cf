"""The render RPCs of the Anthropic Messages and OpenAI Responses APIs: the client's JSON (HttpBody) converted to
its chat form (anthropic_chat.py, responses_chat.py), rendered as RenderChat renders it, and its errors named as
the API names its fields; the count routes (Anthropic's count_tokens, OpenAI's input_tokens.count) answer the
rendered prompt's length and take only the fields that shape it.
"""

from __future__ import annotations

from collections.abc import Callable

from render_svc.anthropic_chat import ANTHROPIC_FIELD_NAMES, messages_chat
from render_svc.client_json import only, renamed, typed
from render_svc.responses_chat import RESPONSES_FIELD_NAMES, responses_chat
from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail


# --- Anthropic Messages --------------------------------------------------------------------------------------
def _anthropic_context(renderer, max_tokens: int) -> Callable[[list[int]], None]:
    """The context limits in Anthropic's words, which clients parse (Claude Code retries with a smaller
    `max_tokens`, LiteLLM raises its context-window error): checked on the prompt's tokens before the shared
    limits (render_svc/prompt.py, scaleout_common/sampling_rules.py) would refuse it in OpenAI's words."""

    def check(ids: list[int]) -> None:
        prompt, most, limit = len(ids), renderer.max_prompt_tokens, renderer.model.max_model_len
        if prompt > most:
            raise fail(Reason.PROMPT_TOO_LONG, f"prompt is too long: {prompt} tokens > {most} maximum", "messages")
        if prompt + max_tokens > limit:
            raise fail(
                Reason.MAX_TOKENS_TOO_LARGE,
                f"input length and `max_tokens` exceed context limit: {prompt} + {max_tokens} > {limit}, "
                "decrease input length or `max_tokens` and try again",
                "max_tokens",
            )

    return check


def render_messages(renderer, body) -> render_pb2.RenderChatResponse:
    """RenderService.RenderMessages: an Anthropic request (HttpBody) rendered as its chat form."""
    return _render_messages(renderer, load_object(body.data))


# What Anthropic's count_tokens takes: what shapes the prompt.
COUNT_TOKENS_FIELDS = (
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",  # its effort reaches the template
    "cache_control",
    "speed",
)


def count_message_tokens(renderer, body) -> render_pb2.CountMessageTokensResponse:
    """RenderService.CountMessageTokens: the prompt an Anthropic request (without max_tokens) renders to."""
    data = only(body, COUNT_TOKENS_FIELDS)
    rendered = _render_messages(renderer, data | {"max_tokens": 1}, counting=True)  # the prompt does not need it
    return render_pb2.CountMessageTokensResponse(input_tokens=len(rendered.generate_request.token_ids))


def _render_messages(renderer, data: dict, counting: bool = False) -> render_pb2.RenderChatResponse:
    request = typed(messages_chat(data, counting))
    try:
        return renderer.render_chat(request, "msg_", _anthropic_context(renderer, request.max_tokens))
    except ServiceError as error:
        raise renamed(error, ANTHROPIC_FIELD_NAMES) from None


# --- OpenAI Responses ----------------------------------------------------------------------------------------
def render_responses(renderer, body) -> render_pb2.RenderChatResponse:
    """RenderService.RenderResponses: a Responses request (HttpBody) rendered as its chat form."""
    return _render_responses(renderer, load_object(body.data))


# What OpenAI's input_tokens.count takes and shapes the prompt (`previous_response_id` and `conversation` are
# refused by the conversion: render keeps nothing).
COUNT_INPUT_TOKENS_FIELDS = (
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
    "text",
    "truncation",
    "previous_response_id",
    "conversation",
)


def count_response_tokens(renderer, body) -> render_pb2.CountResponseTokensResponse:
    """RenderService.CountResponseTokens: the prompt a Responses request renders to (`input` may be left out)."""
    rendered = _render_responses(renderer, {"input": [], **only(body, COUNT_INPUT_TOKENS_FIELDS)})
    return render_pb2.CountResponseTokensResponse(
        object="response.input_tokens", input_tokens=len(rendered.generate_request.token_ids)
    )


def _render_responses(renderer, data: dict) -> render_pb2.RenderChatResponse:
    try:
        return renderer.render_chat(typed(responses_chat(data)), id_prefix="resp_")
    except ServiceError as error:
        raise renamed(error, RESPONSES_FIELD_NAMES) from None
