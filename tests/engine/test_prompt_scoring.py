"""Prompt scoring on the engine: vLLM's prompt_logprob_token_ids (each scored row's named ids, -1 pads: -inf), its
checks, and prompt logprobs refused up front when their answer cannot fit one message (they were computed, then
dropped by gRPC as RESOURCE_EXHAUSTED: a 429 at the gateway)."""

from __future__ import annotations

import asyncio
import dataclasses
import math

import pytest
import torch

from engine_svc.scheduling.admission import admit
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence
from engine_svc.serving import prompt_scores
from engine_svc.serving.prompt_scores import score_prompts
from engine_svc.serving.requests import RequestState
from scaleout.v1 import common_pb2, control_pb2
from scaleout_common.errors import ServiceError
from tests.engine.conftest import TINY_VOCAB, build_tiny, engine_args, engine_stub, generate, request

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


def _owing(request_id: str, prompt: list[int], config: SamplingConfig) -> tuple[Sequence, RequestState]:
    seq = Sequence(request_id, 0, prompt, config)
    seq.want_prompt_logprobs = True
    seq.score_from = 0 if config.prompt_logprobs is not None else config.prompt_logprob_start
    return seq, RequestState(request_id, [seq], None, len(prompt))  # type: ignore[arg-type]


@pytest.mark.parametrize("as_logits", [False, True])
def test_one_log_softmax_serves_both_answers_of_every_owed_row(monkeypatch, as_logits):
    """A batch of a row set that asks for top-k and named ids (from its start on) and one that names ids alone:
    each row's values come from one log_scores call over all of them, each answer what torch says of its row."""
    both, both_state = _owing("a", PROMPT, SamplingConfig(prompt_logprobs=3, prompt_logprob_token_ids=(
        (13, 40), (-1, 17), (21,)), prompt_logprob_start=2))  # fmt: skip
    alone, alone_state = _owing(
        "b", [1, 7, 8, 9], SamplingConfig(prompt_logprob_token_ids=((9, 3),), prompt_logprob_start=2)
    )
    chunks = [Chunk(both, 0, 4), Chunk(alone, 0, 4)]  # rows: positions 0-3 of a, then position 2 of b
    logits = torch.randn(5, TINY_VOCAB, generator=torch.Generator().manual_seed(3))
    calls = []
    real = prompt_scores.log_scores
    monkeypatch.setattr(prompt_scores, "log_scores", lambda x, mode: calls.append(len(x)) or real(x, mode))
    score_prompts(chunks, logits, {"a": both_state, "b": alone_state}, as_logits)
    assert calls == [5]
    expected = logits if as_logits else logits.log_softmax(dim=-1)
    rows = both_state.prompt_logprobs
    assert [r.logprob for r in rows] == pytest.approx([expected[p, PROMPT[p + 1]].item() for p in range(4)])
    assert [r.top_ids for r in rows] == [expected[p].topk(3).indices.tolist() for p in range(4)]
    named = [[expected[2, 13], expected[2, 40]], [-math.inf, expected[3, 17]]]
    assert both_state.prompt_token_id_logprobs == [pytest.approx([float(v) for v in row]) for row in named]
    assert alone_state.prompt_token_id_logprobs == [pytest.approx([expected[4, 9].item(), expected[4, 3].item()])]
    assert not alone_state.prompt_logprobs
    # a owes positions 4 on (its next chunk); b's rows are done: it samples as any other prompt
    assert (both.score_from, both.want_prompt_logprobs, alone.want_prompt_logprobs) == (4, True, False)
    assert list(Chunk(both, 4, 2).prompt_logprob_positions) == [4]


async def test_rows_from_a_late_start_reuse_the_cached_prefix_and_match_the_uncached_scores(tiny_model):
    """prompt_logprob_token_ids from position 13 on: the blocks before it (12 tokens of 4-token blocks) come from
    the prefix cache, the rows from 13 on are computed, the same values as without a cache; prompt_logprobs (every
    row, from 0) takes no block."""
    prompt = [1] + [(7 * j) % 200 + 3 for j in range(19)]
    named = [[t, 5, -1] for t in prompt[14:]]
    scored = request(
        prompt, max_tokens=2, temperature=0, prompt_logprob_token_ids=rows(*named), prompt_logprob_start=13
    )
    whole = request(prompt, max_tokens=2, temperature=0, prompt_logprobs=2)
    answers = {}
    for flags in (("--no-prefix-caching",), ()):
        async with engine_stub(tiny_model, "--block-size", "4", *flags) as (stub, service):
            await stub.GenerateUnary(request(prompt, max_tokens=1))  # the prompt's blocks cached (when caching)
            computed = service.loaded.engine.prompt_tokens_computed
            answers[flags] = (await stub.GenerateUnary(scored), await stub.GenerateUnary(whole))
            answers[flags] += (service.loaded.engine.prompt_tokens_computed - computed,)
    (cold, cold_whole, cold_work), (warm, warm_whole, warm_work) = answers[("--no-prefix-caching",)], answers[()]
    assert (cold.prompt.cached_tokens, warm.prompt.cached_tokens, warm_whole.prompt.cached_tokens) == (0, 12, 0)
    assert (cold_work, warm_work) == (2 * len(prompt), 2 * len(prompt) - 12)
    assert len(warm.prompt.token_id_logprobs) == len(named)
    assert warm.prompt.token_id_logprobs == cold.prompt.token_id_logprobs  # exact (CPU, float32)
    assert all(row.logprobs[2] == -math.inf for row in warm.prompt.token_id_logprobs)
    assert [c.token_ids for c in warm.choices] == [c.token_ids for c in cold.choices]
    assert warm_whole.prompt.logprobs == cold_whole.prompt.logprobs


async def test_a_prompt_preempted_mid_prefill_resumes_its_rows_where_they_stopped(tiny_model):
    """Its decoding neighbour needs blocks while the scored prompt prefills 3 tokens a step: it is preempted and
    comes back, its rows each scored once and as alone (to float32 rounding: the two prefill in other chunks)."""
    flags = ("--num-kv-blocks", "10", "--block-size", "4", "--max-num-batched-tokens", "4", "--max-model-len", "36")
    prompt = [1] + list(range(20, 47))
    scored = request(prompt, temperature=0, max_tokens=2, prompt_logprobs=1, prompt_logprob_token_ids=rows(
        *([t, 9] for t in prompt[4:])), prompt_logprob_start=3)  # fmt: skip
    async with engine_stub(tiny_model, *flags) as (stub, service):
        engine = service.loaded.engine
        await engine.control("pause", control_pb2.PAUSE_MODE_KEEP)  # both queue, in this order, then run
        calls = []
        for message in (request([1, 5, 6, 7], temperature=0, max_tokens=30, ignore_eos=True), scored):
            calls.append(asyncio.ensure_future(generate(stub, message)))
            while engine.scheduler.num_waiting < len(calls):
                await asyncio.sleep(0.01)
        await engine.control("resume")
        _, (messages, _) = await asyncio.gather(*calls)
        assert engine.scheduler.num_preemptions > 0
        alone = await stub.GenerateUnary(scored)
    prompt_info = messages[0].prompt
    assert prompt_info.logprobs.logprobs == pytest.approx(list(alone.prompt.logprobs.logprobs), abs=1e-5)
    assert len(prompt_info.logprobs.logprobs) == len(prompt) - 1
    assert len(prompt_info.token_id_logprobs) == len(prompt) - 4
    for resumed, whole in zip(prompt_info.token_id_logprobs, alone.prompt.token_id_logprobs, strict=True):
        assert list(resumed.logprobs) == pytest.approx(list(whole.logprobs), abs=1e-5)
