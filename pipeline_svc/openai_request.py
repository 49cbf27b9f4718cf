"""OpenAI request JSON -> the contract's typed render request, with every field honoured or refused.

The body is read as sent (google.api.HttpBody), so this module sees every key a client wrote. The policy:
- a field the pipeline honours maps onto RenderChatRequest / RenderCompletionRequest (same names; render,
  the engine and derender act on it);
- a field that changes nothing at its value is accepted (`store: false`, `modalities: ["text"]`,
  `service_tier: "auto"`, `verbosity: "medium"`, `best_of` equal to `n`); `user` and `safety_identifier` go on
  the trace as the caller's identity, and `metadata` (OpenAI's bounds: 16 string pairs) as its attributes, the
  one place this deployment, which stores nothing, keeps anything;
- `reasoning_effort` reaches the chat template as its `reasoning_effort` (vLLM's merge: it wins over a
  `chat_template_kwargs` entry), as Responses' `reasoning.effort` and Anthropic's `output_config.effort` do;
- SGLang's `separate_reasoning`, `stream_reasoning`, `no_stop_trim`, `return_hidden_states` and vLLM's
  `include_reasoning` (vllm-router and SMG add them to the bodies they forward) are the typed request's own
  fields: render maps them (render_svc/sglang_fields.py) and refuses `return_hidden_states: true`;
- structured outputs are enforced while decoding: `response_format` (json_object, json_schema, structural_tag),
  vLLM's `structured_outputs`, `tool_choice` "required" or a named function; schemas travel to render as
  JSON text, so the order of their properties (the order they are generated in) survives;
- any other field, or any other value of those, is refused: UNSUPPORTED_FIELD (400) naming the field;
- `null` means "not given", as in OpenAI's API; a malformed value is INVALID_REQUEST naming the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

# Render-only outputs and features the one hop cannot serve yet: refused, with the reason.
REFUSED = {
    "return_prompt_text": "is a render-only option; call /v1/chat/completions/render",
    "return_token_offsets": "is a render-only option; call /v1/chat/completions/render",
    "kv_transfer_params": "needs disaggregated prefill, which this deployment does not run",
    "prompt_logprobs": "is not returned by the one-hop routes; use /inference/v1/generate",
    "suffix": "is not supported: the default model has no fill-in-the-middle template",
    # vLLM's guided decoding fields, which vLLM removed: the same constraints under the names that replaced them
    **{
        f"guided_{name}": f"was removed from vLLM: use {instead}"
        for name, instead in {
            "json": '`structured_outputs: {"json": <schema>}` or `response_format` (json_schema)',
            "regex": '`structured_outputs: {"regex": ...}`',
            "choice": '`structured_outputs: {"choice": [...]}`',
            "grammar": '`structured_outputs: {"grammar": ...}`',
            "json_object": '`structured_outputs: {"json_object": true}` or `response_format` (json_object)',
            "decoding_backend": "nothing: this deployment has one structured-output backend",
            "whitespace_pattern": '`structured_outputs: {"whitespace_pattern": ...}`',
        }.items()
    },
}
# Fields accepted at the one value that changes nothing.
NO_OP_VALUES = {
    "store": (False,),
    "modalities": (["text"],),
    "service_tier": ("auto", "default"),
    "verbosity": ("medium",),  # the default; as Responses' `text.verbosity`
}
IDENTITY_FIELDS = ("user", "safety_identifier")
PIPELINE_FIELDS = ("stream", "stream_options")  # read here, then forwarded
COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's and vLLM's default for /v1/completions
# Message keys whose null / empty value carries nothing (an SDK echoing an assistant message back sends them).
EMPTY_MESSAGE_KEYS = ("refusal", "annotations", "audio", "function_call")
_AT_FIELD = re.compile(r' at "?\w+\.(\w+)')  # json_format's `at RenderChatRequest.temperature`


@dataclass
class OpenAIRequest:
    typed: Any  # RenderChatRequest or RenderCompletionRequest
    stream: bool
    include_usage: bool
    continuous_usage: bool
    identity: dict[str, str] = field(default_factory=dict)


def _load(body: bytes) -> dict:
    return {k: v for k, v in load_object(body).items() if v is not None}


def _unsupported(name: str, why: str) -> ServiceError:
    return fail(Reason.UNSUPPORTED_FIELD, f"`{name}` {why}", name)


def _metadata(value, identity: dict[str, str]) -> None:
    """Chat's `metadata`, checked as OpenAI checks it, onto the trace."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise fail(Reason.INVALID_REQUEST, "`metadata` must map strings to strings", "metadata")
    if len(value) > 16 or any(len(k) > 64 or len(v) > 512 for k, v in value.items()):
        raise fail(
            Reason.INVALID_REQUEST,
            "`metadata` holds at most 16 pairs, keys <= 64 and values <= 512 characters",
            "metadata",
        )
    identity.update({f"metadata.{key}": text for key, text in value.items()})


def _policy(data: dict, known: set[str], identity: dict[str, str]) -> dict:
    """The fields to parse into the typed request; refuses what cannot be honoured."""
    out = {}
    for name, value in data.items():
        if name in REFUSED:
            raise _unsupported(name, REFUSED[name])
        if name in IDENTITY_FIELDS:
            if not isinstance(value, str):
                raise fail(Reason.INVALID_REQUEST, f"`{name}` must be a string", name)
            identity[name] = value
        elif name in NO_OP_VALUES and name not in known:
            if value not in NO_OP_VALUES[name]:
                raise _unsupported(name, f"= {json.dumps(value)} is not supported by this deployment")
        elif name in known:
            out[name] = value
        else:
            raise _unsupported(name, "is not a field this API takes")
    return out


def _stream_options(out: dict) -> tuple[bool, bool, bool]:
    stream = out.get("stream", False)
    if not isinstance(stream, bool):
        raise fail(Reason.INVALID_REQUEST, "`stream` must be a boolean", "stream")
    options = out.get("stream_options")
    if options is not None and not stream:
        raise fail(Reason.INVALID_REQUEST, "`stream_options` is only allowed with `stream: true`", "stream_options")
    options = options or {}
    if not isinstance(options, dict):
        raise fail(Reason.INVALID_REQUEST, "`stream_options` must be an object", "stream_options")
    # Chunks never carry OpenAI's `obfuscation` padding: `false` asks for what we do, `true` for what we cannot.
    if options.pop("include_obfuscation", None) not in (None, False):
        raise _unsupported("stream_options.include_obfuscation", "= true is not supported: chunks carry no padding")
    include_usage = bool(options.get("include_usage"))
    return stream, include_usage, include_usage and bool(options.get("continuous_usage_stats"))


def _parse(out: dict, message) -> Any:
    try:
        return json_format.ParseDict(out, message)
    except json_format.ParseError as error:
        raise fail(
            Reason.INVALID_REQUEST, f"the request does not fit the API: {error}", _field_of(str(error))
        ) from None


def _field_of(error: str) -> str | None:
    """The top-level field json_format names: `Failed to parse <name> field`, `no field named "<name>"`, or, for a
    scalar of the wrong type (`"temperature": "hot"`), `... at <Message>.<name>`."""
    for marker, end in (("Failed to parse ", " field"), ('no field named "', '"')):
        start = error.find(marker)
        if start >= 0:
            rest = error[start + len(marker) :]
            return rest[: rest.find(end)] if end in rest else rest
    at = _AT_FIELD.search(error)
    return at.group(1) if at else None


def _messages(messages) -> list:
    if not isinstance(messages, list):
        raise fail(Reason.INVALID_REQUEST, "`messages` must be a list", "messages")
    cleaned = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise fail(Reason.INVALID_REQUEST, f"`messages[{i}]` must be an object", f"messages[{i}]")
        kept = {k: v for k, v in message.items() if v is not None and not (k in EMPTY_MESSAGE_KEYS and v in ([], ""))}
        if "reasoning" in kept:  # vLLM >= 0.11 spells reasoning_content `reasoning`
            kept["reasoning_content"] = kept.pop("reasoning")
        cleaned.append(kept)
    return cleaned


def _tool_choice(value) -> None:
    if value in ("none", "auto", "required") or isinstance(value, dict):
        return  # render checks a named tool against the tools and enforces required / named
    raise fail(Reason.INVALID_TOOL_CHOICE, "`tool_choice` must be none, auto, required or a named tool", "tool_choice")


def _schemas_as_text(out: dict) -> None:
    """JSON schemas as JSON text: a protobuf Struct would not keep their key order."""
    fmt = out.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
        spec = fmt["json_schema"]
        if isinstance(spec.get("schema"), dict):
            out["response_format"] = {**fmt, "json_schema": {**spec, "schema": json.dumps(spec["schema"])}}
    outputs = out.get("structured_outputs")
    if isinstance(outputs, dict) and isinstance(outputs.get("json"), dict):
        out["structured_outputs"] = {**outputs, "json": json.dumps(outputs["json"])}


def _reasoning_effort(data: dict) -> None:
    effort = data.pop("reasoning_effort", None)
    if effort is None:
        return
    if not isinstance(effort, str):
        raise fail(Reason.INVALID_REQUEST, "`reasoning_effort` must be a string", "reasoning_effort")
    kwargs = data.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict):
        raise fail(Reason.INVALID_REQUEST, "`chat_template_kwargs` must be an object", "chat_template_kwargs")
    data["chat_template_kwargs"] = {**kwargs, "reasoning_effort": effort}


def chat_request(body: bytes) -> OpenAIRequest:
    data, identity = _load(body), {}
    known = {f.name for f in render_pb2.RenderChatRequest.DESCRIPTOR.fields} - set(REFUSED)
    _reasoning_effort(data)
    if data.get("metadata") is not None:
        _metadata(data.pop("metadata"), identity)
    out = _policy(data, known, identity)
    stream, include_usage, continuous = _stream_options(out)
    if "messages" in out:
        out["messages"] = _messages(out["messages"])
    if "tool_choice" in out:
        _tool_choice(out["tool_choice"])
    _schemas_as_text(out)
    if isinstance(out.get("stop"), str):
        out["stop"] = [out["stop"]]
    typed = _parse(out, render_pb2.RenderChatRequest())
    return OpenAIRequest(typed, stream, include_usage, continuous, identity)


def completion_request(body: bytes) -> OpenAIRequest:
    data, identity = _load(body), {}
    known = {f.name for f in render_pb2.RenderCompletionRequest.DESCRIPTOR.fields} - set(REFUSED) - {"prompts"}
    known |= {"prompt", "best_of"}
    out = _policy(data, known, identity)
    stream, include_usage, continuous = _stream_options(out)
    best_of = out.pop("best_of", None)
    if best_of is not None and best_of != out.get("n", 1):
        raise _unsupported("best_of", "other than n is not supported (vLLM's V1 engine dropped it too)")
    if "prompt" not in out:
        raise fail(Reason.MISSING_PROMPT, "`prompt` is required", "prompt")
    out.update(_prompt(out.pop("prompt")))
    if isinstance(out.get("stop"), str):
        out["stop"] = [out["stop"]]
    out.setdefault("max_tokens", COMPLETION_DEFAULT_MAX_TOKENS)
    _schemas_as_text(out)
    typed = _parse(out, render_pb2.RenderCompletionRequest())
    return OpenAIRequest(typed, stream, include_usage, continuous, identity)


def _prompt(prompt) -> dict:
    """OpenAI's four prompt forms: a string, strings, token ids, or lists of token ids."""
    if isinstance(prompt, str):
        return {"prompts": [prompt]}
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return {"prompts": prompt}
        if all(_is_int(t) for t in prompt):
            return {"prompt_token_ids": [{"token_ids": prompt}]}
        if all(isinstance(p, list) and p and all(_is_int(t) for t in p) for p in prompt):
            return {"prompt_token_ids": [{"token_ids": p} for p in prompt]}
    raise fail(
        Reason.INVALID_REQUEST,
        "`prompt` must be a string, a list of strings, a list of token ids or a list of such lists",
        "prompt",
    )


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
