"""Bounds on what a caller may send, and the typed errors (stable reasons) for violations."""

from __future__ import annotations

import math
from dataclasses import dataclass

import grpc

from scaleout.v1 import derender_pb2, engine_pb2
from scaleout_common.reasons import Reason, fail
from scaleout_common.sampling_rules import (
    MAX_CHOICES,
    MAX_STOP_CHARS,
    MAX_STOP_STRINGS,
    check_stop_regex,
    check_token_ids,
    whole_vocab_cap,
)

MAX_STATUS_CODE = max(code.value[0] for code in grpc.StatusCode)


@dataclass(frozen=True)
class Limits:
    max_choices: int = MAX_CHOICES
    max_tokens_per_choice: int = 131072
    max_top_logprobs: int = 20
    max_stop_strings: int = MAX_STOP_STRINGS
    max_stop_chars: int = MAX_STOP_CHARS
    max_prompt_tail: int = 64
    max_state_bytes: int = 65536
    max_streams: int = 4096  # open DerenderStream calls; more are refused with RESOURCE_EXHAUSTED
    # Token counts a caller reports (prompt, cached, usage): any model's length fits, and prompt + every
    # choice's completion still fits the int32 of `usage.total_tokens`.
    max_reported_tokens: int = 1 << 24

    @classmethod
    def from_args(cls, args) -> Limits:
        return cls(**{name: getattr(args, name) for name in cls.__dataclass_fields__})


def check_context(
    context: derender_pb2.DerenderContext, has_context: bool, limits: Limits, fingerprint: str, vocab_size: int
) -> None:
    if not has_context:
        raise fail(Reason.MISSING_CONTEXT, "a derender context is required", "context")
    if context.tokenizer_fingerprint and context.tokenizer_fingerprint != fingerprint:
        raise fail(
            Reason.TOKENIZER_MISMATCH,
            f"rendered for tokenizer {context.tokenizer_fingerprint}, this server has {fingerprint}",
        )
    for name in ("top_logprobs", "prompt_logprobs"):
        if not context.HasField(name):
            continue
        if getattr(context, name) < 0:
            raise fail(Reason.INVALID_SAMPLING_PARAM, f"{name} must be >= 0", f"context.{name}")
        if getattr(context, name) > (cap := whole_vocab_cap(limits.max_top_logprobs, vocab_size)):
            raise fail(Reason.INVALID_SAMPLING_PARAM, f"{name} is at most {cap}", f"context.{name}")
    if context.n < 0 or context.n > limits.max_choices:
        raise fail(Reason.TOO_MANY_CHOICES, f"n is at most {limits.max_choices}", "context.n")
    if len(context.stop) > limits.max_stop_strings or any(len(s) > limits.max_stop_chars for s in context.stop):
        raise fail(
            Reason.TOO_MANY_STOP_STRINGS,
            f"at most {limits.max_stop_strings} stop strings of {limits.max_stop_chars} characters",
            "context.stop",
        )
    check_stop_regex(context.stop_regex, "context.stop_regex")
    if len(context.prompt_tail_token_ids) > limits.max_prompt_tail:
        raise fail(
            Reason.PROMPT_TAIL_TOO_LONG,
            f"prompt_tail_token_ids holds at most {limits.max_prompt_tail} ids",
            "context.prompt_tail_token_ids",
        )
    check_token_ids(context.prompt_tail_token_ids, vocab_size, "context.prompt_tail_token_ids")
    _check_count(context.num_prompt_tokens, limits, "context.num_prompt_tokens")
    _check_count(len(context.prompt_token_ids), limits, "context.prompt_token_ids")
    check_token_ids(context.prompt_token_ids, vocab_size, "context.prompt_token_ids")


def _check_count(value: int, limits: Limits, field: str) -> None:
    if not 0 <= value <= limits.max_reported_tokens:
        raise fail(Reason.TOO_MANY_TOKENS, f"must be in [0, {limits.max_reported_tokens}] (got {value})", field)


def check_engine_output(message: engine_pb2.GenerateResponse, limits: Limits, vocab_size: int, tokens_so_far) -> None:
    """`tokens_so_far(index)` is how many tokens that choice already has."""
    if message.HasField("error") and not 0 < message.error.code <= MAX_STATUS_CODE:
        raise fail(
            Reason.INVALID_ERROR_STATUS,
            f"an in-band error needs a gRPC status code from 1 to {MAX_STATUS_CODE} (got {message.error.code})",
            "engine_output.error.code",
        )
    if message.HasField("prompt"):
        _check_count(message.prompt.num_tokens, limits, "engine_output.prompt.num_tokens")
        _check_count(message.prompt.cached_tokens, limits, "engine_output.prompt.cached_tokens")
        if message.prompt.HasField("logprobs"):
            rows = message.prompt.logprobs
            _check_logprobs(rows, len(rows.logprobs), vocab_size, "engine_output.prompt.logprobs")
    if message.HasField("usage"):
        for name in ("prompt_tokens", "completion_tokens", "cached_tokens"):
            _check_count(getattr(message.usage, name), limits, f"engine_output.usage.{name}")
    for choice in message.choices:
        if not 0 <= choice.index < limits.max_choices:
            raise fail(
                Reason.TOO_MANY_CHOICES,
                f"choice index is below {limits.max_choices}",
                f"engine_output.choices[{choice.index}].index",
            )
        ids = choice.token_ids
        check_token_ids(ids, vocab_size, "engine_output.choices.token_ids")
        if tokens_so_far(choice.index) + len(ids) > limits.max_tokens_per_choice:
            raise fail(
                Reason.TOO_MANY_TOKENS,
                f"a choice has at most {limits.max_tokens_per_choice} tokens",
                "engine_output.choices.token_ids",
            )
        if choice.HasField("logprobs"):
            _check_logprobs(choice.logprobs, len(ids), vocab_size, "engine_output.choices.logprobs")


def _check_logprobs(logprobs, count: int, vocab_size: int, field: str) -> None:
    if (
        (logprobs.logprobs and len(logprobs.logprobs) != count)
        or (logprobs.ranks and len(logprobs.ranks) != count)
        or len(logprobs.top) > count
    ):
        raise fail(Reason.LOGPROBS_MISMATCH, "logprobs must be parallel to token_ids", field)
    for top in logprobs.top:
        if len(top.token_ids) != len(top.logprobs):
            raise fail(Reason.LOGPROBS_MISMATCH, "top token_ids and logprobs differ in length", f"{field}.top")
        check_token_ids(top.token_ids, vocab_size, f"{field}.top")
        _check_logprob_values(top.logprobs, f"{field}.top.logprobs")
    _check_logprob_values(logprobs.logprobs, f"{field}.logprobs")


def _check_logprob_values(values, field: str) -> None:
    """A logprob is a number <= 0 or -inf (a token of probability 0); NaN and +inf are refused."""
    for i, value in enumerate(values):
        if math.isnan(value) or value == math.inf:
            raise fail(Reason.INVALID_LOGPROB, f"a logprob must be a number or -inf (got {value})", f"{field}[{i}]")
