"""vLLM's render answers (its `GenerateRequest` JSON, as vLLM 0.33's render server prints it) from our render
core's, with ours beside them under `scaleout`:

- `scaleout.generate_request`: our GenerateRequest (what EngineService.Generate takes) without its token_ids,
  which are the top-level `token_ids`;
- `scaleout.derender_context`: our DerenderContext (what DerenderService takes);
- `scaleout.prompt_text`: the rendered prompt, when `return_prompt_text`.
"""

from __future__ import annotations

import orjson
from google.api import httpbody_pb2

from render_svc.completion import render_completion
from render_svc.renderer import Renderer
from render_svc.structured import NONE
from render_svc.vllm_render import sampling
from render_svc.vllm_render.fields import CHAT, COMPLETION
from render_svc.vllm_render.request import VllmRequest, read
from scaleout_common import proto_json

JSON = "application/json"


def render_chat_vllm(renderer: Renderer, body: httpbody_pb2.HttpBody) -> httpbody_pb2.HttpBody:
    """RenderService.RenderChatVllm: one GenerateRequest object."""
    return httpbody_pb2.HttpBody(content_type=JSON, data=chat_json(renderer, body.data))


def render_completion_vllm(renderer: Renderer, body: httpbody_pb2.HttpBody) -> httpbody_pb2.HttpBody:
    """RenderService.RenderCompletionVllm: a list of GenerateRequest objects, one per prompt."""
    return httpbody_pb2.HttpBody(content_type=JSON, data=completion_json(renderer, body.data))


def chat_json(renderer: Renderer, data: bytes) -> bytes:
    """vLLM's chat render, the client's JSON in and the answer's out (the RPC and the HTTP face share it); printed
    by orjson, as vLLM prints it: the stdlib's encoder takes ~15 times as long over a long prompt's token ids."""
    request = read(data, CHAT)
    rendered = renderer.render_chat(request.typed)
    return orjson.dumps(generate_request(renderer, request, rendered, rendered.derender_context.id, chat=True))


def completion_json(renderer: Renderer, data: bytes) -> bytes:
    request = read(data, COMPLETION)
    rendered = render_completion(renderer, request.typed)
    many = len(rendered.prompts) > 1
    return orjson.dumps(
        [
            generate_request(renderer, request, item, item.derender_context.id + (f"-{i}" if many else ""), chat=False)
            for i, item in enumerate(rendered.prompts)
        ]
    )


def generate_request(renderer: Renderer, request: VllmRequest, rendered, request_id: str, chat: bool) -> dict:
    body = request.body
    generate = rendered.generate_request
    token_ids = list(generate.token_ids)
    offsets = None
    if body.get("return_token_offsets") and not request.token_prompts:
        offsets = [[span.start, span.end] for span in rendered.token_offsets]
    stream = bool(body.get("stream"))
    options = body.get("stream_options") if stream else None
    reasoning = renderer.reasoning.name != NONE
    kwargs = _template_kwargs(renderer, body) if chat else None
    answer = {
        "request_id": request_id,
        "token_ids": token_ids,
        "token_offsets": offsets,
        "features": None,
        "content_parts": None,
        "sampling_params": sampling.sampling_params(
            body,
            renderer.model.generation_defaults,
            generate.sampling_params.max_tokens,
            generate.sampling_params.structured_outputs
            if generate.sampling_params.HasField("structured_outputs")
            else None,
            chat,
            tool_parser=bool(renderer.tool_format),
        ),
        "model": body.get("model"),
        "reasoning_ended": _reasoning_ended(body, rendered, reasoning) if chat else None,
        "reasoning_parser_kwargs": {"chat_template_kwargs": kwargs} if chat and reasoning else None,
        "return_token_ids": body.get("return_token_ids"),
        "output_mode": "tokens",
        "parse_context": _parse_context(body, kwargs) if chat else None,
        "stream": stream,
        "stream_options": None
        if options is None
        else {
            "include_usage": options.get("include_usage", False),
            "continuous_usage_stats": options.get("continuous_usage_stats", False),
        },
        "cache_salt": body.get("cache_salt"),
        "priority": body.get("priority", 0),
        "kv_transfer_params": body.get("kv_transfer_params") or None,
        "ec_transfer_params": None,
    }
    del generate.token_ids[:]  # they are the top-level token_ids
    # proto3 JSON, proto field names, zero values left out (MessageToDict's print, ~5x cheaper)
    ours = {
        "generate_request": proto_json.to_dict(generate),
        "derender_context": proto_json.to_dict(rendered.derender_context),
    }
    if body.get("return_prompt_text"):
        ours["prompt_text"] = rendered.prompt_text
    answer["scaleout"] = ours
    return answer


def _reasoning_ended(body: dict, rendered, reasoning: bool) -> bool | None:
    """vLLM's `resolve_reasoning_ended`: true without reasoning in the answer; else, with a reasoning parser,
    whether the prompt left no reasoning block open; null (the engine decides) without one."""
    if body.get("include_reasoning") is False:
        return True
    return not rendered.derender_context.reasoning_started if reasoning else None


def _template_kwargs(renderer: Renderer, body: dict) -> dict:
    """The kwargs the template saw, as vLLM reports them: the server's defaults, the request's (with
    reasoning_effort's), then add_generation_prompt, continue_final_message and documents."""
    kwargs = {**renderer.options.default_template_kwargs, **body.get("chat_template_kwargs", {})}
    if "reasoning_effort" in body:
        kwargs["reasoning_effort"] = body["reasoning_effort"]
        if "enable_thinking" not in body.get("chat_template_kwargs", {}):
            kwargs["enable_thinking"] = body["reasoning_effort"] != "none"
    kwargs["add_generation_prompt"] = body.get("add_generation_prompt", True)
    kwargs["continue_final_message"] = body.get("continue_final_message", False)
    if "documents" in body:
        kwargs["documents"] = body["documents"]
    return kwargs


def _parse_context(body: dict, kwargs: dict | None) -> dict:
    tools = body.get("tools")
    messages = body.get("messages", [])
    calls = sum(
        len(m.get("tool_calls") or ()) for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
    )
    return {
        "tools": sampling.tools(tools),
        "tool_choice": body.get("tool_choice", "auto" if tools else "none"),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "include_reasoning": body.get("include_reasoning", True),
        "chat_template_kwargs": kwargs,
        "history_tool_call_cnt": calls,
    }
