"""Engine mechanics on a tiny random Llama through the real gRPC server: batching, sampling, streaming."""

from __future__ import annotations

import asyncio

import pytest
import torch

from scaleout.v1 import common_pb2, engine_pb2
from tests.engine.conftest import TINY_VOCAB, assert_timed, engine_stub, generate, request

PROMPTS = [
    [1] + [(7 * i + 3 * j) % 200 + 3 for j in range(length)] for i, length in enumerate([5, 17, 1, 33, 9, 12, 2, 40])
]


def reference(model, prompt, new_tokens):
    out = model.generate(
        torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    return out[0, len(prompt) :].tolist()


@pytest.mark.parametrize(
    "flags",
    [
        ("--max-num-batched-tokens", "16", "--block-size", "4"),
        ("--max-num-batched-tokens", "16", "--block-size", "4", "--decode-steps", "5"),
        ("--backend", "transformers", "--max-num-batched-tokens", "16"),
    ],
)
async def test_concurrent_greedy_streams_match_transformers_and_never_mix(tiny_model, flags):
    async with engine_stub(tiny_model, *flags) as (stub, _):
        results = await asyncio.gather(
            *[generate(stub, request(p, temperature=0, max_tokens=12, ignore_eos=True)) for p in PROMPTS]
        )
    for prompt, (messages, tokens) in zip(PROMPTS, results):
        assert tokens[0] == reference(tiny_model, prompt, 12)
        assert messages[0].prompt.num_tokens == len(prompt)
        assert messages[-1].finished and messages[-1].usage.completion_tokens == 12
        assert messages[-1].choices[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH
        assert_timed(messages)


@pytest.mark.parametrize("decode_steps", ["1", "3"])
async def test_preemption_by_recompute_keeps_outputs_exact(tiny_model, decode_steps):
    # 11 usable blocks of 4 tokens; four 28-token sequences cannot all fit at once.
    async with engine_stub(
        tiny_model, "--num-kv-blocks", "12", "--block-size", "4", "--decode-steps", decode_steps
    ) as (stub, service):
        prompts = [[1] + [(5 * i + j) % 200 + 3 for j in range(7)] for i in range(4)]
        results = await asyncio.gather(
            *[generate(stub, request(p, temperature=0, max_tokens=20, ignore_eos=True)) for p in prompts]
        )
        assert service.loaded.engine.scheduler.num_preemptions > 0
        load = await stub.GetLoad(engine_pb2.GetLoadRequest())
    for prompt, (_, tokens) in zip(prompts, results):
        assert tokens[0] == reference(tiny_model, prompt, 20)
    assert load.running == 0 and load.kv_blocks_used == 0


async def test_seeded_sampling_repeats_whatever_the_batch_mates(tiny_model):
    seeded = request(PROMPTS[1], n=3, temperature=1.0, top_p=0.9, top_k=50, seed=1234, max_tokens=16, ignore_eos=True)
    async with engine_stub(tiny_model) as (stub, _):
        _, alone = await generate(stub, seeded)
    async with engine_stub(tiny_model, "--decode-steps", "4") as (stub, _):  # steps queued ahead draw alike
        crowd = await asyncio.gather(
            generate(stub, seeded),
            *[generate(stub, request(p, temperature=1.0, max_tokens=16, ignore_eos=True)) for p in PROMPTS],
        )
        _, other_seed = await generate(
            stub,
            request(PROMPTS[1], n=3, temperature=1.0, top_p=0.9, top_k=50, seed=99, max_tokens=16, ignore_eos=True),
        )
    assert crowd[0][1] == alone
    assert len({tuple(t) for t in alone.values()}) == 3  # choices draw different noise
    assert other_seed != alone


@pytest.mark.parametrize("decode_steps", ["1", "4"])
async def test_stop_tokens_min_tokens_and_logprobs(tiny_model, decode_steps):
    prompt = PROMPTS[3]
    greedy = reference(tiny_model, prompt, 12)
    stop = greedy[4]
    first = greedy.index(stop)
    async with engine_stub(tiny_model, "--decode-steps", decode_steps) as (stub, _):
        messages, tokens = await generate(
            stub, request(prompt, temperature=0, max_tokens=12, stop_token_ids=[stop], logprobs=3, prompt_logprobs=2)
        )
        _, late = await generate(
            stub, request(prompt, temperature=0, max_tokens=12, stop_token_ids=[stop], min_tokens=first + 2)
        )
    assert tokens[0] == greedy[: first + 1]
    final = messages[-1].choices[-1]
    assert final.finish_reason == common_pb2.FINISH_REASON_STOP and final.stop_token_id == stop
    logprobs = [lp for m in messages for c in m.choices for lp in [c.logprobs]]
    ranks = [r for lp in logprobs for r in lp.ranks]
    assert ranks == [1] * len(tokens[0])  # greedy picks the most likely token
    tops = [t for lp in logprobs for t in lp.top]
    assert all(len(t.token_ids) == 3 and list(t.logprobs) == sorted(t.logprobs, reverse=True) for t in tops)
    assert [t.token_ids[0] for t in tops] == tokens[0]
    prompt_lp = messages[0].prompt.logprobs
    assert len(prompt_lp.logprobs) == len(prompt) - 1 and len(prompt_lp.top[0].token_ids) == 2
    assert stop not in late[0][: first + 2]


async def test_logits_processors(tiny_model):
    prompt = PROMPTS[0]
    async with engine_stub(tiny_model) as (stub, _):
        _, allowed = await generate(
            stub,
            request(prompt, temperature=1.0, seed=1, max_tokens=16, ignore_eos=True, allowed_token_ids=[10, 11, 12]),
        )
        _, biased = await generate(
            stub, request(prompt, temperature=0.7, max_tokens=8, ignore_eos=True, logit_bias={42: 100.0})
        )
        _, penalised = await generate(
            stub,
            request(
                prompt,
                temperature=0,
                max_tokens=12,
                ignore_eos=True,
                repetition_penalty=1.5,
                presence_penalty=1.0,
                frequency_penalty=1.0,
                min_p=0.01,
            ),
        )
    assert set(allowed[0]) <= {10, 11, 12}
    assert biased[0] == [42] * 8
    assert len(penalised[0]) == 12 and all(0 <= t < TINY_VOCAB for t in penalised[0])


async def test_stream_interval_groups_tokens(tiny_model):
    async with engine_stub(tiny_model) as (stub, _):
        messages, tokens = await generate(
            stub, request(PROMPTS[0], temperature=0, max_tokens=10, ignore_eos=True, stream_interval=4)
        )
        unary = await stub.GenerateUnary(request(PROMPTS[0], temperature=0, max_tokens=10, ignore_eos=True, n=2))
    sizes = [len(m.choices[0].token_ids) for m in messages]
    # At least 4 tokens a message (more when outputs queued up while the client was busy), the rest at the end.
    assert sum(sizes) == 10 and all(size >= 4 for size in sizes[:-1]) and len(sizes) <= 3
    assert unary.finished and [list(c.token_ids) for c in unary.choices] == [tokens[0], tokens[0]]
    assert [c.index for c in unary.choices] == [0, 1] and unary.usage.completion_tokens == 20
