"""vLLM's render request JSON -> our typed render request, field by field as `fields.FIELDS` says."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from render_svc.client_json import invalid, unsupported
from render_svc.vllm_render.fields import BOTH, COMPLETION, FIELDS, NO_OP, OURS, REFUSED
from scaleout.v1 import render_pb2
from scaleout_common.json_body import load_object
from scaleout_common.openai_body_rules import (
    COMPLETION_DEFAULT_MAX_TOKENS,
    clean_messages,
    parse_typed,
    prompt_forms,
    schemas_as_text,
)
from scaleout_common.reasons import Reason, fail


@dataclass
class VllmRequest:
    body: dict  # the client's JSON, nulls dropped: vLLM's answer echoes some of it
    typed: Any  # RenderChatRequest or RenderCompletionRequest
    token_prompts: bool = False  # a completion's prompt came as token ids


def read(data: bytes, route: str) -> VllmRequest:
    body = {key: value for key, value in load_object(data).items() if value is not None}
    out: dict = {}
    for key, value in body.items():
        field = FIELDS.get(key)
        if field is None:
            raise unsupported(key, "is not a field this deployment takes")
        if field.route not in (BOTH, route):
            raise unsupported(key, f"is not a {route} field here: {field.note}")
        if field.how == OURS:
            out[key] = value
        elif field.how == NO_OP and json.dumps(value) not in map(json.dumps, field.values):
            raise unsupported(key, f"= {json.dumps(value)[:100]} is not supported: {field.note}")
        elif field.how == REFUSED:
            raise unsupported(key, f"is not supported: {field.note}")
    if "stream_options" in body and not body.get("stream"):
        raise invalid("stream_options", "is only allowed with `stream: true`")
    for key in ("user", "session_id"):
        if key in body and not isinstance(body[key], str):
            raise invalid(key, "must be a string")
    if isinstance(body.get("stop"), str):
        out["stop"] = [body["stop"]]
    elif "stop" in body:
        out["stop"] = body["stop"]
    if body.get("seed", -1) != -1:
        out["seed"] = body["seed"]
    _vllm_whitespace(out)
    schemas_as_text(out)
    if route == COMPLETION:
        return _completion(body, out)
    if "messages" in out:
        out["messages"] = clean_messages(out["messages"])
    if "max_tokens" in body:
        out["max_tokens"] = body["max_tokens"]
    if "reasoning_effort" in body:
        _reasoning_effort(body["reasoning_effort"], out)
    return VllmRequest(body, _typed_chat(out))


# What most router traffic is: the model, plain text messages and a few sampling knobs. Built straight into the
# typed request; any other shape, or a value of another type or range, goes through json_format, whose errors
# name the field (~0.1 ms for a short chat, a fifth of this face's cost).
_INT32 = -(2**31), 2**31
_FLOAT32 = 3.4028234663852886e38
_PLAIN_FIELDS = {
    "model": lambda v: type(v) is str,
    "stream": lambda v: type(v) is bool,
    "max_tokens": lambda v: type(v) is int and _INT32[0] <= v < _INT32[1],
    "max_completion_tokens": lambda v: type(v) is int and _INT32[0] <= v < _INT32[1],
    "n": lambda v: type(v) is int and _INT32[0] <= v < _INT32[1],
    "temperature": lambda v: type(v) in (int, float) and abs(v) <= _FLOAT32,
    "top_p": lambda v: type(v) in (int, float) and abs(v) <= _FLOAT32,
}
_PLAIN_MESSAGE_KEYS = frozenset(("role", "content", "name", "tool_call_id", "reasoning_content"))


def _typed_chat(out: dict) -> render_pb2.RenderChatRequest:
    messages = out.get("messages", ())
    fields = {k: v for k, v in out.items() if k != "messages"}
    plain = all(k in _PLAIN_FIELDS and _PLAIN_FIELDS[k](v) for k, v in fields.items())
    if not plain or not all(m.keys() <= _PLAIN_MESSAGE_KEYS and all(map(_is_str, m.values())) for m in messages):
        return parse_typed(out, render_pb2.RenderChatRequest())
    request = render_pb2.RenderChatRequest(**fields)
    for message in messages:
        added = request.messages.add(**{k: v for k, v in message.items() if k != "content"})
        if "content" in message:
            added.content.string_value = message["content"]
    return request


def _vllm_whitespace(out: dict) -> None:
    """vLLM's default for constrained JSON: free whitespace allowed (our own routes default to compact JSON,
    render_svc/structured.py); a request that says `disable_any_whitespace` keeps its choice."""
    response_format = out.get("response_format")
    constrained = isinstance(response_format, dict) and response_format.get("type") != "text"
    if not constrained and "structured_outputs" not in out:
        return
    params = out.get("structured_outputs")
    if params is None:
        out["structured_outputs"] = {"disable_any_whitespace": False}
    elif isinstance(params, dict):
        params.setdefault("disable_any_whitespace", False)


def _is_str(value) -> bool:
    return type(value) is str


def _completion(body: dict, out: dict) -> VllmRequest:
    if "prompt" not in body:
        raise fail(Reason.MISSING_PROMPT, "`prompt` is required", "prompt")
    prompts = prompt_forms(body["prompt"])
    out.update(prompts)
    max_tokens = body.get("max_tokens", COMPLETION_DEFAULT_MAX_TOKENS)
    out["max_tokens"] = 1 if max_tokens == 0 and body.get("echo") else max_tokens  # vLLM's echo without generation
    tokens = "prompt_token_ids" in prompts
    if tokens:
        out.pop("return_token_offsets", None)  # vLLM answers null offsets for token ids
    return VllmRequest(body, parse_typed(out, render_pb2.RenderCompletionRequest()), tokens)


def _reasoning_effort(effort, out: dict) -> None:
    """vLLM's merge: the effort reaches the template as `reasoning_effort`, and turns thinking on or off unless
    chat_template_kwargs says."""
    if not isinstance(effort, str):
        raise invalid("reasoning_effort", "must be a string")
    kwargs = out.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict):
        raise invalid("chat_template_kwargs", "must be an object")
    added: dict = {"reasoning_effort": effort}
    if "enable_thinking" not in kwargs:
        added["enable_thinking"] = effort != "none"
    out["chat_template_kwargs"] = {**kwargs, **added}
