"""Prompt scoring on the engine: vLLM's prompt_logprob_token_ids (each scored row's named ids, -1 pads: -inf), its
checks, and prompt logprobs refused up front when their answer cannot fit one message (they were computed, then
dropped by gRPC as RESOURCE_EXHAUSTED: a 429 at the gateway)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from engine_svc.scheduling.admission import admit
from scaleout.v1 import common_pb2
from scaleout_common.errors import ServiceError
from tests.engine.conftest import TINY_VOCAB, build_tiny, engine_args, engine_stub, request

PROMPT = [1, 5, 9, 13, 17, 21]


def rows(*ids: list[int]) -> list[common_pb2.TokenSequence]:
    return [common_pb2.TokenSequence(token_ids=row) for row in ids]


@pytest.mark.parametrize("core", ["thread", "process"])
async def test_named_rows_are_the_prompt_logprobs_of_their_ids(core):
    """Row i scores prompt token start + i + 1's position: its values are that position's logprobs of the named
    ids (the whole vocabulary's prompt_logprobs, from the same step, say what they are); ragged rows stay ragged."""
    named = [[13, 40], [-1, 17, 200], [21]]
    message = request(
        PROMPT,
        max_tokens=1,
        prompt_logprobs=TINY_VOCAB,
        prompt_logprob_token_ids=rows(*named),
        prompt_logprob_start=2,
    )
    flags = ("--max-logprobs", str(TINY_VOCAB), "--engine-core", core)
    async with engine_stub(None, *flags) as (stub, _service):
        answer = await stub.GenerateUnary(message)
        own = request(PROMPT, max_tokens=1, prompt_logprob_token_ids=rows(*([t] for t in PROMPT[1:])))
        only_named = await stub.GenerateUnary(own)
        late = request(PROMPT, max_tokens=1, prompt_logprob_token_ids=rows(*named), prompt_logprob_start=2)
        late_alone = await stub.GenerateUnary(late)  # rows scored from position 2 on only
    prompt = answer.prompt
    assert [len(row.logprobs) for row in prompt.token_id_logprobs] == [2, 3, 1]
    for i, (ids, row) in enumerate(zip(named, prompt.token_id_logprobs)):
        top = prompt.logprobs.top[2 + i]  # prompt logprobs start at position 0 (predicting token 1)
        whole = dict(zip(top.token_ids, top.logprobs))
        for token, value in zip(ids, row.logprobs):
            assert value == -math.inf if token == -1 else value == pytest.approx(whole[token], abs=1e-5)
    # Without prompt_logprobs: the scores alone, row i predicting token i + 1 (start 0), no top lists.
    assert not only_named.prompt.logprobs.logprobs
    expected = prompt.logprobs.logprobs  # each prompt token's own logprob
    assert [row.logprobs[0] for row in only_named.prompt.token_id_logprobs] == pytest.approx(list(expected), abs=1e-5)
    for alone, beside in zip(late_alone.prompt.token_id_logprobs, prompt.token_id_logprobs, strict=True):
        assert list(alone.logprobs) == pytest.approx(list(beside.logprobs), abs=1e-5)


@pytest.mark.parametrize(
    ("named", "start", "field", "words"),
    [
        ([[5], [9]], 0, "", "has 2 rows, but the prompt has 5 scored rows"),
        ([], 1, "prompt_logprob_start", "requires prompt_logprob_token_ids"),
        ([[]] * 5, 0, "", "non-empty"),
        ([list(range(21))] * 5, 0, "", "max allowed: 20"),
        ([[5], [9], [-2], [1], [1]], 0, "[2]", "out-of-vocab"),
        ([[5], [TINY_VOCAB]], 3, "[1]", "out-of-vocab"),
    ],
)
def test_rows_are_checked_as_vllm_checks_them(named, start, field, words):
    limits = build_tiny(engine_args()).limits
    message = request(PROMPT, prompt_logprob_token_ids=rows(*named), prompt_logprob_start=start)
    with pytest.raises(ServiceError) as refused:
        admit(message, limits)
    path = "sampling_params." + (field if field.isalpha() or "_" in field else "prompt_logprob_token_ids" + field)
    assert refused.value.violations[0][0] == path and words in refused.value.message
    admit(request(PROMPT, prompt_logprob_token_ids=rows([5], [-1, 9]), prompt_logprob_start=3), limits)


def test_prompt_logprobs_that_cannot_fit_one_message_are_refused_up_front():
    """The engine's first message carries every prompt row: 4 bytes a float and 1 a small id per alternative."""
    limits = dataclasses.replace(build_tiny(engine_args("--max-logprobs", "200")).limits, max_message_bytes=10_000)
    prompt = list(range(1, 31))  # 29 rows of 100 alternatives: 29 * 516 bytes at least
    admit(request(prompt, prompt_logprobs=10), limits)
    with pytest.raises(ServiceError) as refused:
        admit(request(prompt, prompt_logprobs=100), limits)
    error = refused.value
    assert error.reason == "INVALID_SAMPLING_PARAM" and error.violations[0][0] == "sampling_params.prompt_logprobs"
    assert "in one message, above this server's" in error.message and "--max-message-mb" in error.message
