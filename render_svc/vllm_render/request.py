"""vLLM's render request JSON -> our typed render request, field by field as `fields.FIELDS` says."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from render_svc.client_json import invalid, unsupported
from render_svc.vllm_render.fields import BOTH, COMPLETION, FIELDS, NO_OP, OURS, REFUSED
from scaleout.v1 import render_pb2
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

COMPLETION_MAX_TOKENS = 16  # vLLM's CompletionRequest default
# Message keys whose null or empty value carries nothing (an SDK echoing an assistant message back sends them).
EMPTY_MESSAGE_KEYS = ("refusal", "annotations", "audio", "function_call")
_NAMED = re.compile(r'(?:Failed to parse |no field named ")(\w+)|at "?\w+\.(\w+)')  # json_format's error texts


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
    _schemas_as_text(out)
    if route == COMPLETION:
        return _completion(body, out)
    if "messages" in out:
        out["messages"] = _messages(out["messages"])
    if "max_tokens" in body:
        out["max_tokens"] = body["max_tokens"]
    if "reasoning_effort" in body:
        _reasoning_effort(body["reasoning_effort"], out)
    return VllmRequest(body, _parse(out, render_pb2.RenderChatRequest()))


def _completion(body: dict, out: dict) -> VllmRequest:
    if "prompt" not in body:
        raise fail(Reason.MISSING_PROMPT, "`prompt` is required", "prompt")
    prompts = _prompt(body["prompt"])
    out.update(prompts)
    max_tokens = body.get("max_tokens", COMPLETION_MAX_TOKENS)
    out["max_tokens"] = 1 if max_tokens == 0 and body.get("echo") else max_tokens  # vLLM's echo without generation
    tokens = "prompt_token_ids" in prompts
    if tokens:
        out.pop("return_token_offsets", None)  # vLLM answers null offsets for token ids
    return VllmRequest(body, _parse(out, render_pb2.RenderCompletionRequest()), tokens)


def _prompt(prompt) -> dict:
    """vLLM's (and OpenAI's) four prompt forms: a string, strings, token ids, or lists of token ids."""
    if isinstance(prompt, str):
        return {"prompts": [prompt]}
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return {"prompts": prompt}
        if all(_is_id(t) for t in prompt):
            return {"prompt_token_ids": [{"token_ids": prompt}]}
        if all(isinstance(p, list) and p and all(_is_id(t) for t in p) for p in prompt):
            return {"prompt_token_ids": [{"token_ids": p} for p in prompt]}
    raise invalid("prompt", "must be a string, a list of strings, a list of token ids or a list of such lists")


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _messages(messages) -> list:
    if not isinstance(messages, list):
        raise invalid("messages", "must be a list")
    cleaned = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise invalid(f"messages[{i}]", "must be an object")
        kept = {k: v for k, v in message.items() if v is not None and not (k in EMPTY_MESSAGE_KEYS and v in ([], ""))}
        if "reasoning" in kept:  # vLLM's name of reasoning_content (which it still takes)
            kept.setdefault("reasoning_content", kept["reasoning"])
            del kept["reasoning"]
        cleaned.append(kept)
    return cleaned


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


def _schemas_as_text(out: dict) -> None:
    """JSON schemas as JSON text: a protobuf Struct would not keep their key order (the order they generate in)."""
    fmt = out.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
        spec = fmt["json_schema"]
        if isinstance(spec.get("schema"), dict):
            out["response_format"] = {**fmt, "json_schema": {**spec, "schema": json.dumps(spec["schema"])}}
    outputs = out.get("structured_outputs")
    if isinstance(outputs, dict) and isinstance(outputs.get("json"), dict):
        out["structured_outputs"] = {**outputs, "json": json.dumps(outputs["json"])}


def _parse(out: dict, message):
    try:
        return json_format.ParseDict(out, message)
    except json_format.ParseError as error:
        named = _NAMED.search(str(error))
        field = next((name for name in named.groups() if name), None) if named else None
        raise fail(Reason.INVALID_REQUEST, f"the request does not fit the API: {error}", field) from None
