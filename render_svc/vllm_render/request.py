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
    reused_prompt,
    schemas_as_text,
)
from scaleout_common.reasons import Reason, fail
from scaleout_common.sampling_rules import GREEDY_BELOW as SAMPLING_EPS


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
    _vllm_checks(body, route)
    for key in ("user", "session_id"):
        if key in body and not isinstance(body[key], str):
            raise invalid(key, "must be a string")
    if isinstance(body.get("stop"), str):
        out["stop"] = [body["stop"]]
    elif "stop" in body:
        out["stop"] = body["stop"]
    if body.get("seed", -1) != -1:
        out["seed"] = body["seed"]
    if body.get("thinking_token_budget") == -1:  # vLLM's "unlimited": as if not given
        del out["thinking_token_budget"]
    _vllm_whitespace(out)
    schemas_as_text(out)
    if route == COMPLETION:
        return _completion(body, out)
    reused_prompt(out)
    if "messages" in out:
        out["messages"] = _refusals_as_text(clean_messages(out["messages"]))
    if "max_tokens" in body:
        out["max_tokens"] = body["max_tokens"]
    if "reasoning_effort" in body:
        _reasoning_effort(body["reasoning_effort"], out)
    return VllmRequest(body, _numbers_as_typed(body, _typed_chat(out)))


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


_CACHE_SALT_FORBIDDEN, _CACHE_SALT_MAX = frozenset("@/\\\0"), 128


def _vllm_checks(body: dict, route: str) -> None:
    """What vLLM's request models refuse that our typed request takes (their validators, 0.33): a salt that is
    empty, long or holds a separator; stream_options without streaming (vLLM tests truthiness: `{}` passes); an
    empty tool list; documents that are not string maps; n > 1 with an explicit greedy temperature."""
    salt = body.get("cache_salt")
    if salt is not None and (
        not isinstance(salt, str)
        or not salt
        or len(salt) > _CACHE_SALT_MAX
        or not _CACHE_SALT_FORBIDDEN.isdisjoint(salt)
    ):
        raise invalid(
            "cache_salt", "must be a non-empty string of at most 128 characters without '@', '/', '\\' or NUL"
        )
    if body.get("stream_options") and not body.get("stream"):
        raise invalid("stream_options", "is only allowed with `stream: true`")
    if route != COMPLETION and body.get("tools") == []:
        raise invalid("tools", "must not be an empty array: give at least one tool or leave the field out")
    documents = body.get("documents")
    if isinstance(documents, list) and not all(
        isinstance(d, dict) and all(type(v) is str for v in d.values()) for d in documents
    ):
        raise invalid("documents", "must be a list of objects whose values are strings")
    temperature, n = body.get("temperature"), body.get("n", 1)
    greedy = isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature < SAMPLING_EPS
    if greedy and type(n) is int and n > 1:
        raise fail(
            Reason.INVALID_SAMPLING_PARAM, f"n must be 1 when sampling greedily (temperature {temperature})", "n"
        )


def _refusals_as_text(messages: list) -> list:
    """A `refusal` content part renders as its text, as vLLM's chat parser reads it (our core takes text parts)."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "refusal" for p in content):
            message["content"] = [
                {"type": "text", "text": p.get("refusal")} if isinstance(p, dict) and p.get("type") == "refusal" else p
                for p in content
            ]
    return messages


def _numbers_as_typed(body: dict, typed):
    """A number given as a string (proto JSON takes `"top_k": "3"`, as vLLM's lax pydantic does) is echoed as
    the number it was read as, as vLLM echoes it."""
    for key, value in body.items():
        if type(value) is str and typed.DESCRIPTOR.fields_by_name.get(key) is not None:
            number = getattr(typed, key)
            if type(number) in (int, float):
                body[key] = number
    return typed


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
    return VllmRequest(body, _numbers_as_typed(body, parse_typed(out, render_pb2.RenderCompletionRequest())), tokens)


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
