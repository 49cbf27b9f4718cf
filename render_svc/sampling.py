"""Sampling-parameter resolution: validate what the caller set, fill the rest from the model's generation_config.

Rules (vLLM's, made explicit):
- A field the caller set is kept as given, even 0 (temperature=0 is greedy, never replaced by a default).
- A field left unset takes the model's generation_config.json value (temperature, top_p, top_k, min_p,
  repetition_penalty, max_new_tokens), else the neutral value; the GenerateRequest carries the resolved value.
- max_tokens: max_completion_tokens, else max_tokens; when set, prompt + max_tokens must fit the model length
  (MAX_TOKENS_TOO_LARGE); when unset, what the context leaves (capped by generation_config's max_new_tokens).
  A prompt that leaves no room is PROMPT_TOO_LONG.
- seed, logprobs and prompt_logprobs stay absent when absent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from render_svc import reasons
from scaleout.v1 import common_pb2

# generation_config.json key -> SamplingParams field, as vLLM reads them.
GENERATION_CONFIG_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "repetition_penalty": "repetition_penalty",
    "max_new_tokens": "max_tokens",
}
NEUTRAL = {
    "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0,
    "presence_penalty": 0.0, "frequency_penalty": 0.0, "min_tokens": 0,
}
LOGIT_BIAS_LIMIT = 100.0


@dataclass(frozen=True)
class ModelLimits:
    max_model_len: int
    vocab_size: int
    max_logprobs: int = 20
    # SamplingParams field -> value, from generation_config.json.
    defaults: dict = field(default_factory=dict)


def _invalid(name: str, message: str) -> reasons.ServiceError:
    return reasons.bad(reasons.INVALID_SAMPLING_PARAM, f"{name} {message}", name)


def _check_ids(name: str, ids, vocab_size: int) -> None:
    for i, token in enumerate(ids):
        if not 0 <= token < vocab_size:
            raise reasons.bad(reasons.TOKEN_ID_OUT_OF_RANGE, f"{name} has id {token}, outside [0, {vocab_size})", f"{name}[{i}]")


def _float(request, name: str, ok, rule: str):
    if not request.HasField(name):
        return None
    value = getattr(request, name)
    if not math.isfinite(value) or not ok(value):
        raise _invalid(name, f"must be {rule} (got {value})")
    return value


def requested_max_tokens(request) -> int | None:
    """max_completion_tokens wins over max_tokens (chat); None when neither is set."""
    for name in ("max_completion_tokens", "max_tokens"):
        if name in request.DESCRIPTOR.fields_by_name and request.HasField(name):
            value = getattr(request, name)
            if value < 1:
                raise _invalid(name, f"must be at least 1 (got {value})")
            return value
    return None


def resolve_max_tokens(requested: int | None, prompt_len: int, limits: ModelLimits) -> int:
    room = limits.max_model_len - prompt_len
    if room <= 0:
        raise reasons.too_far(
            reasons.PROMPT_TOO_LONG,
            f"the prompt has {prompt_len} tokens and the model length is {limits.max_model_len}: no room to generate",
            "messages",
        )
    if requested is None:
        cap = limits.defaults.get("max_tokens")
        return min(room, cap) if cap else room
    if requested > room:
        raise reasons.too_far(
            reasons.MAX_TOKENS_TOO_LARGE,
            f"max_tokens is too large: {requested}. The model length is {limits.max_model_len} and the prompt has "
            f"{prompt_len} tokens ({requested} > {limits.max_model_len} - {prompt_len})",
            "max_tokens",
        )
    return requested


def _logprobs(request, chat: bool, limit: int) -> int | None:
    if chat:
        top = request.top_logprobs if request.HasField("top_logprobs") else None
        if top is not None and not 0 <= top <= limit:
            raise _invalid("top_logprobs", f"must be in [0, {limit}] (got {top})")
        if top and not request.logprobs:
            raise _invalid("top_logprobs", "needs logprobs=true")
        return (top or 0) if request.logprobs else None
    if not request.HasField("logprobs"):
        return None
    if not 0 <= request.logprobs <= limit:
        raise _invalid("logprobs", f"must be in [0, {limit}] (got {request.logprobs})")
    return request.logprobs


def _given(request) -> dict:
    """The tunable fields the caller set (None: unset), validated."""
    return {
        "temperature": _float(request, "temperature", lambda v: v >= 0, ">= 0"),
        "top_p": _float(request, "top_p", lambda v: 0 < v <= 1, "in (0, 1]"),
        "min_p": _float(request, "min_p", lambda v: 0 <= v <= 1, "in [0, 1]"),
        "repetition_penalty": _float(request, "repetition_penalty", lambda v: v > 0, "> 0"),
        "presence_penalty": _float(request, "presence_penalty", lambda v: -2 <= v <= 2, "in [-2, 2]"),
        "frequency_penalty": _float(request, "frequency_penalty", lambda v: -2 <= v <= 2, "in [-2, 2]"),
        "top_k": max(request.top_k, 0) if request.HasField("top_k") else None,
        "min_tokens": request.min_tokens if request.HasField("min_tokens") else None,
    }


def validate(request, limits: ModelLimits, chat: bool) -> None:
    """Every check that does not need the prompt (run before rendering)."""
    _given(request)
    _logprobs(request, chat, limits.max_logprobs)
    requested_max_tokens(request)
    if request.HasField("n") and request.n < 1:
        raise _invalid("n", f"must be at least 1 (got {request.n})")
    if request.HasField("min_tokens") and request.min_tokens < 0:
        raise _invalid("min_tokens", f"must be at least 0 (got {request.min_tokens})")
    if request.HasField("top_k") and request.top_k < -1:
        raise _invalid("top_k", f"must be -1 (off), 0 (off) or positive (got {request.top_k})")
    if request.HasField("prompt_logprobs") and not 0 <= request.prompt_logprobs <= limits.max_logprobs:
        raise _invalid("prompt_logprobs", f"must be in [0, {limits.max_logprobs}]")
    if request.HasField("stream_interval") and request.stream_interval < 1:
        raise _invalid("stream_interval", "must be at least 1")
    for i, stop in enumerate(request.stop):
        if not stop:
            raise reasons.bad(reasons.INVALID_SAMPLING_PARAM, "stop strings must not be empty", f"stop[{i}]")
    _check_ids("stop_token_ids", request.stop_token_ids, limits.vocab_size)
    _check_ids("allowed_token_ids", request.allowed_token_ids, limits.vocab_size)
    _check_ids("logit_bias", list(request.logit_bias), limits.vocab_size)


def resolve(request, prompt_len: int, limits: ModelLimits, chat: bool) -> common_pb2.SamplingParams:
    """The SamplingParams the engine runs, for a validated request whose prompt has `prompt_len` tokens."""
    resolved = {
        name: value if value is not None else limits.defaults.get(name, NEUTRAL[name])
        for name, value in _given(request).items()
    }
    max_tokens = resolve_max_tokens(requested_max_tokens(request), prompt_len, limits)
    if resolved["min_tokens"] > max_tokens:
        raise _invalid("min_tokens", f"must not exceed max_tokens ({resolved['min_tokens']} > {max_tokens})")
    params = common_pb2.SamplingParams(
        **resolved,
        max_tokens=max_tokens,
        ignore_eos=request.ignore_eos,
        stop_token_ids=request.stop_token_ids,
        allowed_token_ids=request.allowed_token_ids,
        logit_bias={k: max(-LOGIT_BIAS_LIMIT, min(LOGIT_BIAS_LIMIT, v)) for k, v in request.logit_bias.items()},
    )
    if request.HasField("seed"):
        params.seed = request.seed
    logprobs = _logprobs(request, chat, limits.max_logprobs)
    if logprobs is not None:
        params.logprobs = logprobs
    if request.HasField("prompt_logprobs"):
        params.prompt_logprobs = request.prompt_logprobs
    return params
