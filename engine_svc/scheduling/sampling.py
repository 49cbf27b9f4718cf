"""Per-request sampling parameters, resolved once at admission."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from engine_svc.structured.spec import Budget, Constraint, Gate


@dataclass
class SamplingConfig:
    temperature: float = 1.0  # 0: greedy
    top_p: float = 1.0
    top_k: int = 0  # 0: no cut
    min_p: float = 0.0
    seed: int = 0  # 63-bit key of this request's noise; random when the caller gave none
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    allowed_token_ids: list[int] = field(default_factory=list)
    min_tokens: int = 0
    max_tokens: int = 0
    ignore_eos: bool = False
    stop_token_ids: frozenset[int] = frozenset()  # EOS ids included unless ignore_eos
    # The caller's own stop ids: the one that ends a choice is reported (`stop_token_id`); EOS is a plain stop,
    # as vLLM's stop_reason is null for it.
    requested_stop_ids: frozenset[int] = frozenset()
    stop: tuple[str, ...] = ()  # stop strings the engine matches (stop_strings.py)
    stop_keep_special: bool = False  # ... in text decoded with special tokens kept
    logprobs: int | None = None
    logprob_token_ids: tuple[int, ...] = ()  # each token's alternatives are these ids, in place of the top ones
    prompt_logprobs: int | None = None
    # vLLM's prompt_logprob_token_ids: the ids scored at each prompt row from prompt_logprob_start on
    prompt_logprob_token_ids: tuple[tuple[int, ...], ...] = ()
    prompt_logprob_start: int = 0
    bad_words: tuple[tuple[int, ...], ...] = ()  # token id sequences never to complete
    constraint: Constraint | None = None  # structured outputs: what the output must follow
    gate: Gate | None = None  # ... from the token after this reasoning ends (None: from the first token)
    thinking_budget: Budget | None = None  # the most tokens the reasoning block may hold

    def __post_init__(self) -> None:
        # Read for every row of every step: computed once.
        self.greedy = self.temperature <= 1e-5
        # Whether this request's logits rows need more than temperature/top-k/top-p/min-p.
        self.needs_processing = bool(
            self.repetition_penalty != 1.0
            or self.presence_penalty
            or self.frequency_penalty
            or self.logit_bias
            or self.allowed_token_ids
            or (self.min_tokens and self.stop_token_ids)
            or self.bad_words
        )
        self.needs_sort = not self.greedy and (self.top_k > 0 or self.top_p < 1.0)


def resolve(
    params,
    *,
    default_temperature: float,
    max_tokens: int,
    eos_token_ids: list[int],
    constraint: Constraint | None = None,
    gate: Gate | None = None,
    thinking_budget: Budget | None = None,
) -> SamplingConfig:
    """Fold a validated SamplingParams message into a SamplingConfig (absent fields take server defaults)."""

    def opt(name, default):
        return getattr(params, name) if params.HasField(name) else default

    stops = set(params.stop_token_ids)
    if not params.ignore_eos:
        stops.update(eos_token_ids)
    return SamplingConfig(
        temperature=opt("temperature", default_temperature),
        top_p=opt("top_p", 1.0),
        top_k=opt("top_k", 0),
        min_p=opt("min_p", 0.0),
        seed=params.seed if params.HasField("seed") else random.getrandbits(63),
        repetition_penalty=opt("repetition_penalty", 1.0),
        presence_penalty=opt("presence_penalty", 0.0),
        frequency_penalty=opt("frequency_penalty", 0.0),
        logit_bias=dict(params.logit_bias),
        allowed_token_ids=list(params.allowed_token_ids),
        min_tokens=opt("min_tokens", 0),
        max_tokens=max_tokens,
        ignore_eos=params.ignore_eos,
        stop_token_ids=frozenset(stops),
        requested_stop_ids=frozenset(params.stop_token_ids),
        stop=tuple(params.stop),
        stop_keep_special=params.stop_keep_special_tokens,
        logprobs=opt("logprobs", None),
        logprob_token_ids=tuple(params.logprob_token_ids),
        prompt_logprobs=opt("prompt_logprobs", None),
        prompt_logprob_token_ids=tuple(tuple(row.token_ids) for row in params.prompt_logprob_token_ids),
        prompt_logprob_start=params.prompt_logprob_start,
        bad_words=tuple(tuple(word.token_ids) for word in params.bad_words if word.token_ids),
        constraint=constraint,
        gate=gate,
        thinking_budget=thinking_budget,
    )
