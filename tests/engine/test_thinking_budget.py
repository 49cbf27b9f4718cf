"""Thinking budgets in the engine (SamplingParams.thinking_budget), on the tiny random Llama of the
structured-output tests: once the reasoning block holds the budget's tokens, its end tag is the only choice,
whatever the weights say (a -100 bias on the end tag shows the model would never close it itself)."""

from __future__ import annotations

import asyncio
import re

import grpc
import pytest

from tests.engine.conftest import generate, request
from tests.engine.test_structured_outputs import (
    END_THINK,
    PROMPTS,
    THINK,
    VOCAB,
    build_plain,
    constrained,
    guided_stub,
    reasoning,
    refused,
    text,
)

FLAGS = [(), ("--decode-steps", "4"), ("--engine-core", "process")]


def budgeted(prompt, budget: int, *, started: bool = True, seed: int = 0, max_tokens: int = 24):
    """A sampled request that never closes the block on its own, its reasoning capped at `budget` tokens."""
    message = request(prompt, max_tokens=max_tokens, temperature=1.0, seed=seed, ignore_eos=True)
    _cap(message, budget, started)
    return message


def _cap(message, budget: int, started: bool):
    params = message.sampling_params
    params.logit_bias[END_THINK] = -100.0
    params.thinking_budget.max_tokens = budget
    params.thinking_budget.reasoning.CopyFrom(reasoning(started))
    return message


@pytest.mark.parametrize("flags", FLAGS)
async def test_the_end_tag_is_forced_once_the_budget_is_spent(flags):
    async with guided_stub(*flags) as (stub, _):
        runs = await asyncio.gather(*(generate(stub, budgeted(p, 3 + i, seed=i)) for i, p in enumerate(PROMPTS)))
    for i, (_, tokens) in enumerate(runs):
        ids = tokens[0]
        assert ids.index(END_THINK) == 3 + i, ids  # the prompt opened the block: every output token is in it
        assert len(ids) == 24 and END_THINK not in ids[4 + i :]  # the answer is free, and capped once


async def test_a_block_the_output_opens_is_counted_from_its_opening():
    async with guided_stub() as (stub, _):
        message = budgeted(PROMPTS[0], 2, started=False)
        message.sampling_params.logit_bias[THINK] = 100.0
        _, tokens = await generate(stub, message)
        plain = budgeted(PROMPTS[1], 2, started=False)
        plain.sampling_params.logit_bias[THINK] = -100.0  # no block: nothing to cap
        _, free = await generate(stub, plain)
    ids = tokens[0]
    assert ids[0] == THINK and ids[3] == END_THINK, ids
    assert END_THINK not in free[0] and THINK not in free[0]


async def test_a_zero_budget_closes_the_block_at_once():
    async with guided_stub() as (stub, _):
        _, tokens = await generate(stub, budgeted(PROMPTS[2], 0))
    assert tokens[0][0] == END_THINK


@pytest.mark.parametrize("flags", FLAGS[:2])
async def test_the_budget_and_a_constraint_after_the_reasoning(flags):
    async with guided_stub(*flags) as (stub, _):
        messages = []
        for i, p in enumerate(PROMPTS):
            message = constrained(p, regex=r"[0-9]{2}", reasoning=reasoning(started=True), max_tokens=30)
            message.sampling_params.seed = i
            messages.append(_cap(message, 4, started=True))
        runs = await asyncio.gather(*(generate(stub, m) for m in messages))
    for _, tokens in runs:
        ids = tokens[0]
        assert ids.index(END_THINK) == 4, ids
        assert re.fullmatch(r"[0-9]{2}", text(ids[5:])), text(ids)
    assert any(not VOCAB[t].isdigit() for _, tokens in runs for t in tokens[0][:4])  # the reasoning was free


async def test_bad_budgets_are_refused_by_name():
    async with guided_stub() as (stub, _):
        negative = await refused(stub, budgeted(PROMPTS[0], -1))
        no_end = budgeted(PROMPTS[0], 2)
        del no_end.sampling_params.thinking_budget.reasoning.end[:]
        endless = await refused(stub, no_end)
        outside = budgeted(PROMPTS[0], 2)
        outside.sampling_params.thinking_budget.reasoning.end.add(token_ids=[10**6])
        out_of_vocab = await refused(stub, outside)
    assert negative.reason == endless.reason == "INVALID_SAMPLING_PARAM"
    assert negative.violations[0][0] == "sampling_params.thinking_budget.max_tokens"
    assert endless.violations[0][0] == "sampling_params.thinking_budget.reasoning.end"
    assert out_of_vocab.reason == "TOKEN_ID_OUT_OF_VOCAB"
    assert negative.code == grpc.StatusCode.INVALID_ARGUMENT


async def test_an_engine_without_a_tokenizer_refuses_a_budget():
    async with guided_stub(build=build_plain) as (stub, _):
        error = await refused(stub, budgeted(PROMPTS[0], 2))
    assert error.reason == "STRUCTURED_OUTPUTS_UNAVAILABLE"
