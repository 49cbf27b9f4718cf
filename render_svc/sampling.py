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
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "min_tokens": 0,
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


def requested_max_tokens(fields: dict) -> int | None:
    """max_completion_tokens wins over max_tokens (chat); None when neither is set."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = fields.get(name)
        if value is not None:
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


def _logprobs(fields: dict, chat: bool, limit: int) -> int | None:
    if chat:
        top, wanted = fields.get("top_logprobs"), fields.get("logprobs", False)
        if top is not None and not 0 <= top <= limit:
            raise _invalid("top_logprobs", f"must be in [0, {limit}] (got {top})")
        if top and not wanted:
            raise _invalid("top_logprobs", "needs logprobs=true")
        return (top or 0) if wanted else None
    count = fields.get("logprobs")
    if count is not None and not 0 <= count <= limit:
        raise _invalid("logprobs", f"must be in [0, {limit}] (got {count})")
    return count


# Tunable float fields: (valid?, rule for the error message).
_FLOAT_RULES = {
    "temperature": (lambda v: v >= 0, ">= 0"),
    "top_p": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "min_p": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "repetition_penalty": (lambda v: v > 0, "> 0"),
    "presence_penalty": (lambda v: -2 <= v <= 2, "in [-2, 2]"),
    "frequency_penalty": (lambda v: -2 <= v <= 2, "in [-2, 2]"),
}
# Int fields: (smallest valid value, rule).
_INT_RULES = {
    "n": (1, "at least 1"),
    "min_tokens": (0, "at least 0"),
    "top_k": (-1, "-1 (off), 0 (off) or positive"),
    "stream_interval": (1, "at least 1"),
}


def _check(fields: dict, limits: ModelLimits) -> None:
    for name, (ok, rule) in _FLOAT_RULES.items():
        value = fields.get(name)
        if value is not None and (not math.isfinite(value) or not ok(value)):
            raise _invalid(name, f"must be {rule} (got {value})")
    for name, (lowest, rule) in _INT_RULES.items():
        value = fields.get(name)
        if value is not None and value < lowest:
            raise _invalid(name, f"must be {rule} (got {value})")
    prompt_logprobs = fields.get("prompt_logprobs")
    if prompt_logprobs is not None and not 0 <= prompt_logprobs <= limits.max_logprobs:
        raise _invalid("prompt_logprobs", f"must be in [0, {limits.max_logprobs}]")
    for i, stop in enumerate(fields.get("stop", ())):
        if not stop:
            raise reasons.bad(reasons.INVALID_SAMPLING_PARAM, "stop strings must not be empty", f"stop[{i}]")
    for name in ("stop_token_ids", "allowed_token_ids", "logit_bias"):
        if name in fields:
            reasons.check_token_ids(list(fields[name]), limits.vocab_size, name)


def resolve(request, prompt_len: int, limits: ModelLimits, chat: bool) -> common_pb2.SamplingParams:
    """Validate the request's sampling fields and resolve them for a prompt of `prompt_len` tokens."""
    fields = {field.name: value for field, value in request.ListFields()}
    _check(fields, limits)
    logprobs = _logprobs(fields, chat, limits.max_logprobs)
    max_tokens = resolve_max_tokens(requested_max_tokens(fields), prompt_len, limits)
    defaults = limits.defaults
    resolved = {name: fields.get(name, defaults.get(name, neutral)) for name, neutral in NEUTRAL.items()}
    resolved["top_k"] = max(resolved["top_k"], 0)
    if resolved["min_tokens"] > max_tokens:
        raise _invalid("min_tokens", f"must not exceed max_tokens ({resolved['min_tokens']} > {max_tokens})")
    params = common_pb2.SamplingParams(
        max_tokens=max_tokens,
        ignore_eos=request.ignore_eos,
        stop_token_ids=request.stop_token_ids,
        allowed_token_ids=request.allowed_token_ids,
        seed=fields.get("seed"),
        logprobs=logprobs,
        prompt_logprobs=fields.get("prompt_logprobs"),
        **resolved,
    )
    if "logit_bias" in fields:
        params.logit_bias.update(
            {k: max(-LOGIT_BIAS_LIMIT, min(LOGIT_BIAS_LIMIT, v)) for k, v in request.logit_bias.items()}
        )
    return params
