"""Checks a GenerateRequest before it is queued; each refusal has a stable reason."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from engine_svc.scheduling.sampling import SamplingConfig, resolve
from engine_svc.scheduling.sequence import Sequence
from scaleout_common.errors import failed_precondition, invalid_argument, out_of_range

MAX_LOGPROBS = 20


@dataclass
class ModelLimits:
    vocab_size: int
    max_model_len: int
    eos_token_ids: list[int]
    tokenizer_fingerprint: str  # empty: no tokenizer, nothing to check
    default_temperature: float = 1.0
    max_n: int = 64
    default_stream_interval: int = 1


def _check_ids(ids, vocab_size: int, field: str) -> None:
    bad = [t for t in ids if not 0 <= t < vocab_size]
    if bad:
        raise invalid_argument(
            "TOKEN_ID_OUT_OF_VOCAB", f"{field} holds ids outside [0, {vocab_size}): {bad[:5]}", field
        )


def _check_range(params, name: str, low: float, high: float, *, low_open: bool = False) -> None:
    if not params.HasField(name):
        return
    value = getattr(params, name)
    if value < low or value > high or (low_open and value == low):
        bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise invalid_argument(
            "INVALID_SAMPLING_PARAMS", f"{name} must be in {bound}, got {value}", f"sampling_params.{name}"
        )


def admit(request, limits: ModelLimits) -> tuple[str, list[Sequence], int]:
    """(request id, one sequence per choice, stream interval) or a typed error."""
    if (
        limits.tokenizer_fingerprint
        and request.tokenizer_fingerprint
        and request.tokenizer_fingerprint != limits.tokenizer_fingerprint
    ):
        raise failed_precondition(
            "TOKENIZER_MISMATCH",
            f"request rendered for tokenizer {request.tokenizer_fingerprint}, "
            f"this engine serves {limits.tokenizer_fingerprint}",
        )
    prompt = list(request.token_ids)
    if not prompt:
        raise invalid_argument("EMPTY_PROMPT", "token_ids must not be empty", "token_ids")
    _check_ids(prompt, limits.vocab_size, "token_ids")
    params = request.sampling_params
    n = request.n if request.HasField("n") else 1
    if not 1 <= n <= limits.max_n:
        raise invalid_argument("INVALID_N", f"n must be in [1, {limits.max_n}], got {n}", "n")
    if request.HasField("stream_interval") and request.stream_interval < 1:
        raise invalid_argument("INVALID_STREAM_INTERVAL", "stream_interval must be >= 1", "stream_interval")
    if params.HasField("max_tokens") and params.max_tokens < 1:
        raise invalid_argument(
            "INVALID_MAX_TOKENS", f"max_tokens must be >= 1, got {params.max_tokens}", "sampling_params.max_tokens"
        )
    room = limits.max_model_len - len(prompt)
    if room < 1:
        raise out_of_range(
            "PROMPT_TOO_LONG",
            f"the prompt has {len(prompt)} tokens; the model takes at most "
            f"{limits.max_model_len - 1} before generating",
            "token_ids",
        )
    if params.HasField("max_tokens") and params.max_tokens > room:
        raise out_of_range(
            "MAX_TOKENS_TOO_LARGE",
            f"prompt ({len(prompt)}) + max_tokens ({params.max_tokens}) "
            f"exceeds the model length {limits.max_model_len}",
            "sampling_params.max_tokens",
        )
    _check_range(params, "temperature", 0.0, 100.0)
    _check_range(params, "top_p", 0.0, 1.0, low_open=True)
    _check_range(params, "top_k", 0, limits.vocab_size)
    _check_range(params, "min_p", 0.0, 1.0)
    _check_range(params, "repetition_penalty", 0.0, 100.0, low_open=True)
    _check_range(params, "presence_penalty", -2.0, 2.0)
    _check_range(params, "frequency_penalty", -2.0, 2.0)
    _check_range(params, "min_tokens", 0, room)
    _check_range(params, "logprobs", 0, MAX_LOGPROBS)
    _check_range(params, "prompt_logprobs", 0, MAX_LOGPROBS)
    _check_ids(params.logit_bias.keys(), limits.vocab_size, "sampling_params.logit_bias")
    _check_ids(params.allowed_token_ids, limits.vocab_size, "sampling_params.allowed_token_ids")
    _check_ids(params.stop_token_ids, limits.vocab_size, "sampling_params.stop_token_ids")
    config: SamplingConfig = resolve(
        params,
        default_temperature=limits.default_temperature,
        max_tokens=params.max_tokens if params.HasField("max_tokens") else room,
        eos_token_ids=limits.eos_token_ids,
    )
    request_id = request.request_id or uuid.uuid4().hex
    seqs = [Sequence(request_id, i, prompt, config, priority=request.priority) for i in range(n)]
    seqs[0].want_prompt_logprobs = config.prompt_logprobs is not None and len(prompt) > 1
    interval = request.stream_interval if request.HasField("stream_interval") else limits.default_stream_interval
    return request_id, seqs, interval
