"""vLLM's `POST /v1/messages/render` and `POST /v1/responses/render` (0.33): the Anthropic Messages / OpenAI Responses
JSON converted to its chat form as vLLM converts it (render_svc/anthropic_chat.py, responses_chat.py: each field
honoured or refused naming it), read as vLLM's chat render reads that form (request.py) and answered as vLLM's render
server answers: one GenerateRequest (answer.py), with ours under `scaleout`.

As vLLM's: Messages renders exactly as the chat request it converts to (its render_chat_request), so its answer is
the chat render's (`request_id` `chatcmpl-...`). Responses answers its own GenerateRequest (vLLM's
render_responses_request): `request_id` is the Response's (`resp_...`), and it has no `parse_context`,
`reasoning_ended` or `stream_options`. Errors name the client's fields (`stop_sequences`, `max_output_tokens`, ...).
"""

from __future__ import annotations

import orjson
from google.api import httpbody_pb2

from render_svc.anthropic_chat import ANTHROPIC_FIELD_NAMES, messages_chat
from render_svc.client_json import renamed
from render_svc.renderer import Renderer
from render_svc.responses_chat import RESPONSES_FIELD_NAMES, responses_chat
from render_svc.vllm_render.answer import JSON, generate_request
from render_svc.vllm_render.fields import CHAT
from render_svc.vllm_render.request import read
from scaleout_common.errors import ServiceError
from scaleout_common.json_body import load_object

RESPONSES_NULL = ("parse_context", "reasoning_ended", "stream_options")  # vLLM's responses render leaves them out


def messages_json(renderer: Renderer, data: bytes) -> bytes:
    try:
        chat = messages_chat(load_object(data))
        if chat.get("stream"):  # vLLM's conversion streams with usage on every chunk
            chat["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        answer = _render(renderer, chat, "chatcmpl")
    except ServiceError as error:
        raise renamed(error, ANTHROPIC_FIELD_NAMES) from None
    answer["parse_context"]["tool_choice"] = chat.get("tool_choice")  # vLLM's: null unless the request says
    return orjson.dumps(answer)


def responses_json(renderer: Renderer, data: bytes) -> bytes:
    try:
        answer = _render(renderer, responses_chat(load_object(data)), "resp_")
    except ServiceError as error:
        raise renamed(error, RESPONSES_FIELD_NAMES) from None
    if answer["sampling_params"].get("extra_args") is None:  # vLLM's Responses sampling params print {}
        answer["sampling_params"]["extra_args"] = {}
    return orjson.dumps(answer | dict.fromkeys(RESPONSES_NULL))


def _render(renderer: Renderer, chat: dict, id_prefix: str) -> dict:
    """The chat form rendered as vLLM's chat render renders it; the Responses routing key kept as the typed
    route keeps it (it groups the caller's requests on one engine; vLLM's answer has no field for it)."""
    cache_key = chat.pop("prompt_cache_key", None)
    request = read(orjson.dumps(chat), CHAT)
    if cache_key:
        request.typed.prompt_cache_key = cache_key
    rendered = renderer.render_chat(request.typed, id_prefix)
    return generate_request(renderer, request, rendered, rendered.derender_context.id, chat=True)


def render_messages_vllm(renderer: Renderer, body: httpbody_pb2.HttpBody) -> httpbody_pb2.HttpBody:
    """RenderService.RenderMessagesVllm."""
    return httpbody_pb2.HttpBody(content_type=JSON, data=messages_json(renderer, body.data))


def render_responses_vllm(renderer: Renderer, body: httpbody_pb2.HttpBody) -> httpbody_pb2.HttpBody:
    """RenderService.RenderResponsesVllm."""
    return httpbody_pb2.HttpBody(content_type=JSON, data=responses_json(renderer, body.data))
