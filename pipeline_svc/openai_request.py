"""OpenAI request JSON -> the contract's typed render request, with every field honoured or refused.

The body is read as sent (google.api.HttpBody), so this module sees every key a client wrote. The policy:
- a field the pipeline honours maps onto RenderChatRequest / RenderCompletionRequest (same names; render,
  the engine and derender act on it);
- a field that changes nothing at its value is accepted (`store: false`, `modalities: ["text"]`,
  `service_tier: "auto"`, `verbosity: "medium"`, `best_of` equal to `n`); `user` and `safety_identifier` go on
  the trace as the caller's identity, and `metadata` (OpenAI's bounds: 16 string pairs) as its attributes, the
  one place the chat routes, which store nothing, keep anything;
- chat's `prompt_cache_retention` "in_memory" is what the engine's prefix cache is; "24h" is refused
  (scaleout_common/openai_body_rules.py owns the rule, which Responses shares);
- `reasoning_effort` reaches the chat template as its `reasoning_effort` (vLLM's merge: it wins over a
  `chat_template_kwargs` entry), as Responses' `reasoning.effort` and Anthropic's `output_config.effort` do;
- SGLang's `separate_reasoning`, `stream_reasoning`, `no_stop_trim`, `return_hidden_states` and vLLM's
  `include_reasoning` (vllm-router and SMG add them to the bodies they forward) are the typed request's own
  fields: render maps them (render_svc/sglang_fields.py) and refuses `return_hidden_states: true`;
- vLLM's `kv_transfer_params` (disaggregated prefill and decode, as vllm-router's P/D mode sends them) go to
  the engine, which maps them (engine_svc/serving/kv_transfer/vllm_params.py); a prefill step's answer is
  unary (`stream: true` with `do_remote_decode` is refused) and covers one prompt; on chat, their
  `prompt_token_ids` (the prefill step's prompt, forwarded) are the request's `prompt_token_ids`, sent in place
  of the rendered messages;
- vLLM's `return_tokens_as_token_ids` names logprobs' tokens `token_id:<id>`; its `prompt_logprobs` are
  printed on each unary completion choice and on a unary chat answer (refused with `stream: true`, as vLLM refuses
  a stream); its `logprob_token_ids` (with `logprobs`) are each token's alternatives, after the token itself;
- vLLM's `use_beam_search` and `length_penalty` run beam search over the engine (pipeline_svc/beam_search.py), which
  refuses the fields it does not use;
- SGLang's `stop_regex` (a pattern or patterns) ends a choice as a stop string does (derender_svc/stop_matcher.py);
- structured outputs are enforced while decoding: `response_format` (json_object, json_schema, structural_tag),
  vLLM's `structured_outputs`, SGLang's `regex` / `ebnf` / (completions) `json_schema`, `tool_choice`
  "required" or a named function; schemas travel to render as
  JSON text, so the order of their properties (the order they are generated in) survives;
- any other field, or any other value of those, is refused: UNSUPPORTED_FIELD (400) naming the field;
- `null` means "not given", as in OpenAI's API; a malformed value is INVALID_REQUEST naming the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pipeline_svc.beam_search import Beam, beam_request
from scaleout.v1 import render_pb2
from scaleout_common.errors import QUOTE_CHARS, ServiceError, clip
from scaleout_common.json_body import load_object
from scaleout_common.openai_body_rules import (
    COMPLETION_DEFAULT_MAX_TOKENS,
    clean_messages,
    parse_typed,
    prompt_cache_retention,
    prompt_forms,
    reused_prompt,
    schemas_as_text,
)
from scaleout_common.reasons import Reason, fail

# Render-only outputs and features the one hop cannot serve yet: refused, with the reason.
REFUSED = {
    "return_prompt_text": "is a render-only option; call /v1/chat/completions/render",
    "return_token_offsets": "is a render-only option; call /v1/chat/completions/render",
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


@dataclass
class OpenAIRequest:
    typed: Any  # RenderChatRequest or RenderCompletionRequest
    stream: bool
    include_usage: bool
    continuous_usage: bool
    identity: dict[str, str] = field(default_factory=dict)
    beam: Beam | None = None  # vLLM's use_beam_search (pipeline_svc/beam_search.py)


def _load(body: bytes) -> dict:
    return {k: v for k, v in load_object(body).items() if v is not None}


def _unsupported(name: str, why: str) -> ServiceError:
    name = clip(name, QUOTE_CHARS)  # a client's key: quoted by its head, as any client value
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
                raise _unsupported(
                    name, f"= {clip(json.dumps(value), QUOTE_CHARS)} is not supported by this deployment"
                )
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


def _tool_choice(value) -> None:
    if value in ("none", "auto", "required") or isinstance(value, dict):
        return  # render checks a named tool against the tools and enforces required / named
    raise fail(Reason.INVALID_TOOL_CHOICE, "`tool_choice` must be none, auto, required or a named tool", "tool_choice")


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


def _kv_transfer(out: dict, stream: bool, prompts: int = 1) -> None:
    """vLLM's P/D parameters: an object; a prefill step answers one unary response for one prompt."""
    params = out.get("kv_transfer_params")
    if params is None:
        return
    if not isinstance(params, dict):
        raise fail(Reason.INVALID_REQUEST, "`kv_transfer_params` must be an object", "kv_transfer_params")
    if params.get("do_remote_decode") and stream:
        raise _unsupported("kv_transfer_params", "with do_remote_decode answers unary: send `stream: false`")
    if prompts != 1:
        raise _unsupported("kv_transfer_params", "hands one prompt's KV blocks off: send one prompt")


def _prompt_logprobs(out: dict, stream: bool) -> None:
    """vLLM's `prompt_logprobs` go on a unary answer only (its 0 too: no field is accepted and dropped)."""
    if stream and "prompt_logprobs" in out:
        raise _unsupported("prompt_logprobs", "is not available with `stream: true` (as in vLLM)")


def chat_request(body: bytes, defaults: dict | None = None) -> OpenAIRequest:
    """`defaults`: the server's values of request fields (vLLM's server flags), which the body's own override."""
    data, identity = (defaults or {}) | _load(body), {}
    beam = beam_request(data)
    known = {f.name for f in render_pb2.RenderChatRequest.DESCRIPTOR.fields} - set(REFUSED)
    _reasoning_effort(data)
    if "prompt_cache_retention" in data:
        prompt_cache_retention(data.pop("prompt_cache_retention"))
    if data.get("metadata") is not None:
        _metadata(data.pop("metadata"), identity)
    out = _policy(data, known, identity)
    stream, include_usage, continuous = _stream_options(out)
    _prompt_logprobs(out, stream)
    _kv_transfer(out, stream)
    reused_prompt(out)
    if "messages" in out:
        out["messages"] = clean_messages(out["messages"])
    if "tool_choice" in out:
        _tool_choice(out["tool_choice"])
    schemas_as_text(out)
    for name in ("stop", "stop_regex"):  # a string or strings
        if isinstance(out.get(name), str):
            out[name] = [out[name]]
    typed = parse_typed(out, render_pb2.RenderChatRequest())
    return OpenAIRequest(typed, stream, include_usage, continuous, identity, beam)


def completion_request(body: bytes, defaults: dict | None = None) -> OpenAIRequest:
    data, identity = (defaults or {}) | _load(body), {}
    beam = beam_request(data)
    known = {f.name for f in render_pb2.RenderCompletionRequest.DESCRIPTOR.fields} - set(REFUSED) - {"prompts"}
    known |= {"prompt", "best_of"}
    out = _policy(data, known, identity)
    stream, include_usage, continuous = _stream_options(out)
    _prompt_logprobs(out, stream)
    best_of = out.pop("best_of", None)
    if best_of is not None and best_of != out.get("n", 1):
        raise _unsupported("best_of", "other than n is not supported (vLLM's V1 engine dropped it too)")
    if "prompt" not in out:
        raise fail(Reason.MISSING_PROMPT, "`prompt` is required", "prompt")
    out.update(prompt_forms(out.pop("prompt")))
    _kv_transfer(out, stream, len(out.get("prompts") or out.get("prompt_token_ids") or [1]))
    for name in ("stop", "stop_regex"):  # a string or strings
        if isinstance(out.get(name), str):
            out[name] = [out[name]]
    out.setdefault("max_tokens", COMPLETION_DEFAULT_MAX_TOKENS)
    schemas_as_text(out)
    typed = parse_typed(out, render_pb2.RenderCompletionRequest())
    return OpenAIRequest(typed, stream, include_usage, continuous, identity, beam)
