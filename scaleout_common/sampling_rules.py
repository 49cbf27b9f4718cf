"""The sampling rules of the contract: bounds, defaults and precedence, for every route that takes them.

Render resolves an OpenAI-style request into `SamplingParams`; the engine checks any `SamplingParams` it is
sent (render's or a direct caller's). Both call `check` here, so the same bad knob gets the same reason
(INVALID_SAMPLING_PARAM, naming the field) on `/v1/chat/completions/render`, `/inference/v1/generate` and the
one hop, and a value that passes render always passes the engine.

Rules (vLLM's, made explicit):
- Bounds: temperature in [0, 2]; top_p in (0, 1]; top_k -1 or 0 (off) or positive; min_p in [0, 1];
  repetition_penalty > 0; presence/frequency_penalty in [-2, 2]; n in [1, max_n]; min_tokens >= 0 and at
  most max_tokens; max_tokens >= 1; stream_interval >= 1; logprobs and prompt_logprobs in [0, max_logprobs]
  (-1, vLLM's "the whole vocabulary", is the vocabulary size where max_logprobs allows it, on render's requests
  and the engine's alike);
  every float finite (NaN and infinities are refused, never clamped); token ids inside the vocabulary;
  stop strings non-empty, at most MAX_STOP_STRINGS of MAX_STOP_CHARS characters (derender's default bounds,
  checked here first so the caller hears of its own field, TOO_MANY_STOP_STRINGS); SGLang's stop_regex at most 32
  patterns of 256 bytes that compile and cannot match the empty text; logit_bias values finite, then clamped to
  [-100, 100] as OpenAI documents; vLLM's logprob_token_ids at most MAX_LOGPROB_TOKEN_IDS ids in the vocabulary,
  only with logprobs (whose count it replaces; render keeps the first of a repeated id); prompt_logprobs that
  derender's answer (a stream's JSON event) cannot carry in one message refused (scaleout_common/prompt_logprob_rules.py).
- Precedence: a field the caller set is kept as given, even 0 (temperature=0 is greedy, never replaced by
  a default); a field left unset takes the model's generation_config.json value (`GENERATION_CONFIG_KEYS`),
  else the neutral value (`NEUTRAL`). max_completion_tokens wins over max_tokens.
- max_tokens: when set, prompt + max_tokens must fit the model length (MAX_TOKENS_TOO_LARGE); when unset,
  what the context leaves (capped by generation_config's max_new_tokens). No room at all is PROMPT_TOO_LONG.
- seed, logprobs and prompt_logprobs stay absent when absent.
- Choices: a request's prompts x n are at most MAX_CHOICES (derender's --max-choices default), checked by render
  before any prompt is tokenized or generated: a 1,000-prompt completion is refused before any engine work.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

from scaleout.v1 import common_pb2
from scaleout_common import prompt_logprob_rules
from scaleout_common.errors import QUOTE_CHARS, ServiceError, clip
from scaleout_common.reasons import Reason, fail

# generation_config.json key -> SamplingParams field, as vLLM reads them.
GENERATION_CONFIG_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "repetition_penalty": "repetition_penalty",
    "max_new_tokens": "max_tokens",
}
# The value of a knob nobody set: it changes nothing.
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
MAX_LOGPROBS = 20

LOGPROB_COUNTS = ("logprobs", "prompt_logprobs", "top_logprobs")
GREEDY_BELOW = 1e-5  # a temperature this small samples greedily

# Float knobs: (valid?, the rule in words).
FLOAT_RULES = {
    "temperature": (lambda v: 0 <= v <= 2, "in [0, 2]"),
    "top_p": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "min_p": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "repetition_penalty": (lambda v: v > 0, "> 0"),
    "presence_penalty": (lambda v: -2 <= v <= 2, "in [-2, 2]"),
    "frequency_penalty": (lambda v: -2 <= v <= 2, "in [-2, 2]"),
}
# Int knobs: (smallest valid value, the rule in words).
INT_RULES = {
    "n": (1, "at least 1"),
    "min_tokens": (0, "at least 0"),
    "max_tokens": (1, "at least 1"),
    "top_k": (-1, "-1 (off), 0 (off) or positive"),
    "stream_interval": (1, "at least 1"),
}
TOKEN_ID_FIELDS = ("stop_token_ids", "allowed_token_ids", "logit_bias", "logprob_token_ids")
MAX_LOGPROB_TOKEN_IDS = 128  # vLLM's bound on logprob_token_ids
MAX_STOP_STRINGS, MAX_STOP_CHARS = 16, 256
MAX_STOP_REGEX, MAX_STOP_REGEX_BYTES = 32, 256  # SGLang's MAX_STOP_REGEX_COUNT and MAX_STOP_REGEX_LEN
MAX_CHOICES = 128  # prompts x n of one request


def logprob_cap(flag: str) -> int:
    """--max-logprobs as vLLM takes it: a count, or -1 for the whole vocabulary (resolved by `whole_vocab_cap`)."""
    value = int(flag)
    if value < -1:
        raise argparse.ArgumentTypeError(f"-1 (the whole vocabulary) or a count >= 0, not {value}")
    return value


def whole_vocab_cap(cap: int, vocab_size: int) -> int:
    """A --max-logprobs of -1 is the vocabulary's size, as vLLM's."""
    return vocab_size if cap == -1 else cap


@dataclass(frozen=True)
class ModelLimits:
    """What the served model allows; `defaults` are its generation_config.json values (SamplingParams names)."""

    max_model_len: int
    vocab_size: int
    max_logprobs: int = MAX_LOGPROBS
    max_n: int = 64
    defaults: dict = field(default_factory=dict)
    max_message_bytes: int = 64 << 20  # --max-message-mb: derender's answer (a stream's event) carries prompt_logprobs


def invalid(name: str, message: str) -> ServiceError:
    return fail(Reason.INVALID_SAMPLING_PARAM, f"{name.rsplit('.', 1)[-1]} {message}", name)


def check_token_ids(ids: Sequence[int], vocab_size: int, field_path: str) -> None:
    """Every id must be in the vocabulary (TOKEN_ID_OUT_OF_VOCAB names the first one that is not). min and max
    scan in C: a Python loop over a long prompt cost ~100 us of the server's one thread per request."""
    if not ids or (min(ids) >= 0 and max(ids) < vocab_size):
        return
    i, token = next((i, t) for i, t in enumerate(ids) if not 0 <= t < vocab_size)
    raise fail(
        Reason.TOKEN_ID_OUT_OF_VOCAB,
        f"{field_path} has id {token}, out of vocabulary [0, {vocab_size})",
        f"{field_path}[{i}]",
    )


def check(fields: Mapping[str, Any], limits: ModelLimits, prefix: str = "") -> None:
    """Validate the knobs present in `fields` (SamplingParams names; `prefix` is their path in the request)."""
    for name, (ok, rule) in FLOAT_RULES.items():
        value = fields.get(name)
        if value is not None and (not math.isfinite(value) or not ok(value)):
            raise invalid(prefix + name, f"must be {rule} (got {value})")
    for name, (lowest, rule) in INT_RULES.items():
        value = fields.get(name)
        if value is not None and value < lowest:
            raise invalid(prefix + name, f"must be {rule} (got {value})")
    if fields.get("n", 1) > limits.max_n:
        raise invalid(prefix + "n", f"must be at most {limits.max_n} (got {fields['n']})")
    if fields.get("min_tokens", 0) > fields.get("max_tokens", math.inf):
        raise invalid(
            prefix + "min_tokens", f"must not exceed max_tokens ({fields['min_tokens']} > {fields['max_tokens']})"
        )
    for name in LOGPROB_COUNTS:
        value = fields.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= limits.max_logprobs:
            raise invalid(prefix + name, f"must be in [0, {limits.max_logprobs}] (got {value})")
    stops = fields.get("stop", ())
    if len(stops) > MAX_STOP_STRINGS or any(len(stop) > MAX_STOP_CHARS for stop in stops):
        raise fail(
            Reason.TOO_MANY_STOP_STRINGS,
            f"at most {MAX_STOP_STRINGS} stop strings of {MAX_STOP_CHARS} characters",
            prefix + "stop",
        )
    for i, stop in enumerate(stops):
        if not stop:
            raise invalid(f"{prefix}stop[{i}]", "must not be empty")
    check_stop_regex(fields.get("stop_regex", ()), prefix + "stop_regex")
    named = fields.get("logprob_token_ids", ())
    if len(named) > MAX_LOGPROB_TOKEN_IDS:
        raise invalid(prefix + "logprob_token_ids", f"holds at most {MAX_LOGPROB_TOKEN_IDS} ids (got {len(named)})")
    wanted = fields.get("logprobs")  # chat's is a switch, completions' (and the engine's) a count: 0 is set
    if named and (wanted is None or wanted is False):
        raise invalid(prefix + "logprob_token_ids", "needs logprobs set (true on chat)")
    for name in TOKEN_ID_FIELDS:
        if name in fields:
            check_token_ids(list(fields[name]), limits.vocab_size, prefix + name)
    for token, bias in fields.get("logit_bias", {}).items():
        if not math.isfinite(bias):
            raise invalid(f"{prefix}logit_bias[{token}]", f"must be a finite number (got {bias})")


def check_stop_regex(patterns: Sequence[str], field_path: str) -> None:
    """SGLang's stop_regex: at most MAX_STOP_REGEX patterns of MAX_STOP_REGEX_BYTES, each one that compiles (the
    `regex` module, which derender matches with)."""
    if len(patterns) > MAX_STOP_REGEX or any(len(p.encode()) > MAX_STOP_REGEX_BYTES for p in patterns):
        raise fail(
            Reason.TOO_MANY_STOP_STRINGS,
            f"at most {MAX_STOP_REGEX} stop_regex patterns of {MAX_STOP_REGEX_BYTES} bytes",
            field_path,
        )
    for i, pattern in enumerate(patterns):
        try:
            regex.compile(pattern)
        except (regex.error, RecursionError) as error:
            raise invalid(
                f"{field_path}[{i}]", f"is not a regular expression: {clip(str(error), QUOTE_CHARS)}"
            ) from None
        if not pattern or regex.fullmatch(pattern, "", timeout=0.01) is not None:
            raise invalid(f"{field_path}[{i}]", "must not match the empty text")


def check_choices(prompts: int, n: int, field_path: str, limit: int = MAX_CHOICES) -> None:
    """A request's choices (prompts x n) within `limit` (TOO_MANY_CHOICES names the prompts' field)."""
    if prompts * n > limit:
        raise fail(
            Reason.TOO_MANY_CHOICES,
            f"{prompts} prompts x n={n} is {prompts * n} choices, more than the limit of {limit}",
            field_path,
        )


def requested_max_tokens(fields: Mapping[str, Any]) -> int | None:
    """max_completion_tokens wins over max_tokens (chat); None when neither is set."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = fields.get(name)
        if value is not None:
            if value < 1:
                raise invalid(name, f"must be at least 1 (got {value})")
            return value
    return None


def resolve_max_tokens(
    requested: int | None, prompt_len: int, limits: ModelLimits, prompt_field: str, max_tokens_field: str = "max_tokens"
) -> int:
    room = limits.max_model_len - prompt_len
    if room <= 0:
        raise fail(
            Reason.PROMPT_TOO_LONG,
            f"This model's maximum context length is {limits.max_model_len} tokens. However, your request has "
            f"{prompt_len} input tokens, which leaves no room to generate. Please reduce the length of the input.",
            prompt_field,
        )
    if requested is None:
        cap = limits.defaults.get("max_tokens")
        return min(room, cap) if cap else room
    if requested > room:
        raise fail(
            Reason.MAX_TOKENS_TOO_LARGE,
            f"'{max_tokens_field}' is too large: {requested}. This model's maximum context length is "
            f"{limits.max_model_len} tokens and your request has {prompt_len} input tokens "
            f"({requested} > {limits.max_model_len} - {prompt_len})",
            max_tokens_field,
        )
    return requested


def whole_vocabulary(fields: dict[str, Any], limits: ModelLimits) -> dict[str, Any]:
    """vLLM's -1 in a logprob count: the whole vocabulary, where max_logprobs allows that many (else left -1, which
    `check` refuses as out of [0, max_logprobs], naming the field). `fields` is changed in place and returned."""
    for name in LOGPROB_COUNTS:
        if fields.get(name) == -1 and limits.vocab_size <= limits.max_logprobs:
            fields[name] = limits.vocab_size
    return fields


def _logprobs(fields: Mapping[str, Any], chat: bool) -> int | None:
    """Chat: `logprobs` is a switch and `top_logprobs` the count; completions: `logprobs` is the count."""
    if not chat:
        return fields.get("logprobs")
    top, wanted = fields.get("top_logprobs"), fields.get("logprobs", False)
    if top and not wanted:
        raise invalid("top_logprobs", "needs logprobs=true")
    return (top or 0) if wanted else None


def resolve(request, prompt_len: int, limits: ModelLimits, chat: bool, prompt_field: str) -> common_pb2.SamplingParams:
    """Validate a render request's sampling fields and resolve them for a prompt of `prompt_len` tokens."""
    fields = whole_vocabulary({f.name: value for f, value in request.ListFields()}, limits)
    check({k: v for k, v in fields.items() if k != "max_tokens"}, limits)
    logprobs = _logprobs(fields, chat)
    max_tokens = resolve_max_tokens(requested_max_tokens(fields), prompt_len, limits, prompt_field)
    defaults = limits.defaults
    resolved = {name: fields.get(name, defaults.get(name, neutral)) for name, neutral in NEUTRAL.items()}
    resolved["top_k"] = max(resolved["top_k"], 0)
    check({"min_tokens": resolved["min_tokens"], "max_tokens": max_tokens}, limits)
    form = prompt_logprob_rules.JSON if request.stream else prompt_logprob_rules.DERENDER  # a stream's one event
    top, most = fields.get("prompt_logprobs"), limits.max_message_bytes
    prompt_logprob_rules.check_answer_fits(prompt_len, top, most, form, field="prompt_logprobs")
    params = common_pb2.SamplingParams(
        max_tokens=max_tokens,
        ignore_eos=request.ignore_eos,
        stop_token_ids=request.stop_token_ids,
        allowed_token_ids=request.allowed_token_ids,
        seed=fields.get("seed"),
        logprobs=logprobs,
        prompt_logprobs=fields.get("prompt_logprobs"),
        logprob_token_ids=dict.fromkeys(request.logprob_token_ids),
        **resolved,
    )
    params.logit_bias.update(clamp_logit_bias(request.logit_bias))
    return params


def clamp_logit_bias(bias: Mapping[int, float]) -> dict[int, float]:
    return {k: max(-LOGIT_BIAS_LIMIT, min(LOGIT_BIAS_LIMIT, v)) for k, v in bias.items()}
