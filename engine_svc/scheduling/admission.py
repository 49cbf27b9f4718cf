"""Checks a GenerateRequest before it is queued; each refusal has a stable reason.

The sampling rules are the contract's (scaleout_common.sampling_rules), the same ones render applies, so a
knob render accepts the engine accepts, and a bad one gets the same reason whichever route it came by.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from engine_svc.scheduling.lora_cards import LoraCard, lora_id
from engine_svc.scheduling.sampling import SamplingConfig, resolve
from engine_svc.scheduling.sequence import Sequence
from engine_svc.structured import spec
from scaleout_common import prompt_logprob_rules, sampling_rules, structured_output_rules
from scaleout_common.reasons import Reason, fail


@dataclass
class EngineLimits:
    vocab_size: int
    max_model_len: int
    eos_token_ids: list[int]
    tokenizer_fingerprint: str  # empty: no tokenizer, nothing to check
    default_temperature: float = 1.0
    max_n: int = 64
    max_logprobs: int = sampling_rules.MAX_LOGPROBS  # top alternatives a token's (or a prompt token's) logprobs carry
    default_stream_interval: int = 1
    structured_outputs: bool = False  # a grammar backend (it needs the tokenizer's vocabulary) is loaded
    stop_strings: bool = False  # a tokenizer to match stop strings with (stop_strings.py) is loaded
    max_grammar_bytes: int = structured_output_rules.MAX_GRAMMAR_BYTES
    grammar_timeout_s: float = structured_output_rules.COMPILE_TIMEOUT_S
    max_message_bytes: int = 64 << 20  # --max-message-mb: a request's prompt logprobs must fit one message
    loras: dict[str, LoraCard] | None = None  # the LoRA adapters served by name (None: no --enable-lora)

    @property
    def rules(self) -> sampling_rules.ModelLimits:
        return sampling_rules.ModelLimits(
            self.max_model_len, self.vocab_size, max_logprobs=self.max_logprobs, max_n=self.max_n
        )


def admit(request, limits: EngineLimits, key: str | None = None) -> tuple[str, list[Sequence], int]:
    """(the engine's key for the request, one sequence per choice, stream interval) or a typed error. `key`: the
    server's (its request id scoped by tenant, serving/tenancy.py); else the request id, or a fresh one."""
    if (
        limits.tokenizer_fingerprint
        and request.tokenizer_fingerprint
        and request.tokenizer_fingerprint != limits.tokenizer_fingerprint
    ):
        raise fail(
            Reason.TOKENIZER_MISMATCH,
            f"request rendered for tokenizer {request.tokenizer_fingerprint}, "
            f"this engine serves {limits.tokenizer_fingerprint}",
        )
    adapter = lora_id(request.lora_name, limits.loras)
    prompt = list(request.token_ids)
    if not prompt:
        raise fail(Reason.EMPTY_PROMPT, "token_ids must not be empty", "token_ids")
    rules = limits.rules
    sampling_rules.check_token_ids(prompt, limits.vocab_size, "token_ids")
    sampling_rules.check(
        {f.name: getattr(request, f.name) for f, _ in request.ListFields() if f.name in ("n", "stream_interval")}, rules
    )
    params = request.sampling_params
    fields = sampling_rules.whole_vocabulary({f.name: value for f, value in params.ListFields()}, rules)
    for name in ("logprobs", "prompt_logprobs"):  # -1 resolved: what the cores read
        if params.HasField(name):
            setattr(params, name, fields[name])
    sampling_rules.check(fields, rules, prefix="sampling_params.")
    requested = params.max_tokens if params.HasField("max_tokens") else None
    max_tokens = sampling_rules.resolve_max_tokens(
        requested, len(prompt), rules, "token_ids", max_tokens_field="sampling_params.max_tokens"
    )
    sampling_rules.check(
        {"min_tokens": fields.get("min_tokens", 0), "max_tokens": max_tokens}, rules, "sampling_params."
    )
    if params.stop and not limits.stop_strings:
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            "this engine has no tokenizer, so it cannot match stop strings (serve a model folder that holds one)",
            "sampling_params.stop",
        )
    prompt_scoring(params, len(prompt), limits)
    constraint, gate = structured(params, limits)
    budget = thinking_budget(params, limits)
    config: SamplingConfig = resolve(
        params,
        default_temperature=limits.default_temperature,
        max_tokens=max_tokens if requested is not None else limits.max_model_len - len(prompt),
        eos_token_ids=limits.eos_token_ids,
        constraint=constraint,
        gate=gate,
        thinking_budget=budget,
    )
    request_id = key or request.request_id or uuid.uuid4().hex
    n = request.n if request.HasField("n") else 1
    seqs = [
        Sequence(
            request_id,
            i,
            prompt,
            config,
            priority=request.priority,
            cache_salt=request.cache_salt,
            lora_id=adapter,
            lora_name=request.lora_name if adapter else "",
        )
        for i in range(n)
    ]
    scored = config.prompt_logprobs is not None or bool(config.prompt_logprob_token_ids)
    seqs[0].want_prompt_logprobs = scored and len(prompt) > 1
    seqs[0].score_from = 0 if config.prompt_logprobs is not None else config.prompt_logprob_start
    interval = request.stream_interval if request.HasField("stream_interval") else limits.default_stream_interval
    return request_id, seqs, interval


def prompt_scoring(params, prompt_len: int, limits: EngineLimits) -> None:
    """prompt_logprob_token_ids rows that fit the prompt, and prompt logprobs that fit one message."""
    rows = [list(row.token_ids) for row in params.prompt_logprob_token_ids]
    prompt_logprob_rules.check_token_id_rows(
        rows, params.prompt_logprob_start, prompt_len, limits.vocab_size, limits.max_logprobs, "sampling_params."
    )
    top = params.prompt_logprobs if params.HasField("prompt_logprobs") else None
    field = "sampling_params.prompt_logprobs"
    prompt_logprob_rules.check_answer_fits(
        prompt_len, top, limits.max_message_bytes, prompt_logprob_rules.ENGINE, field
    )


def structured(params, limits: EngineLimits) -> tuple[spec.Constraint | None, spec.Gate | None]:
    """The request's checked structured-output constraint and where it starts (None: unconstrained)."""
    structured_output_rules.check_token_ids_of(params, limits.vocab_size)
    if not params.HasField("structured_outputs"):
        return None, None
    if not limits.structured_outputs:
        raise fail(
            Reason.STRUCTURED_OUTPUTS_UNAVAILABLE,
            "this engine has no tokenizer, so it cannot enforce structured outputs (serve a model folder that "
            "holds one)",
            structured_output_rules.FIELD,
        )
    structured_output_rules.check(params.structured_outputs, max_bytes=limits.max_grammar_bytes)
    return spec.from_proto(params.structured_outputs)


def thinking_budget(params, limits: EngineLimits) -> spec.Budget | None:
    """The request's checked thinking budget (None: the reasoning is not capped; its ids were checked with the
    other token ids, `structured`)."""
    if not params.HasField("thinking_budget"):
        return None
    field = "sampling_params.thinking_budget"
    budget = params.thinking_budget
    if budget.max_tokens < 0:
        raise fail(Reason.INVALID_SAMPLING_PARAM, f"{field}.max_tokens must be >= 0", f"{field}.max_tokens")
    if not any(seq.token_ids for seq in budget.reasoning.end):
        raise fail(
            Reason.INVALID_SAMPLING_PARAM,
            f"{field}.reasoning.end is empty: the engine forces the block's end tag when the budget is spent",
            f"{field}.reasoning.end",
        )
    if not limits.structured_outputs:
        raise fail(
            Reason.STRUCTURED_OUTPUTS_UNAVAILABLE,
            "this engine has no tokenizer, so it cannot force the end of a reasoning block (serve a model folder "
            "that holds one)",
            field,
        )
    return spec.budget_from_proto(budget)
