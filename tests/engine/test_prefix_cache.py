"""Automatic prefix caching through the real engine server: hits, identical outputs, salts, churn, eviction."""

from __future__ import annotations

import asyncio
import random

import pytest

from scaleout.v1 import engine_pb2
from tests.engine.conftest import engine_stub, generate, request
from tests.engine.test_cancel import _until_idle
from tests.engine.test_generate import reference

SYSTEM = [1] + [(11 * j) % 190 + 5 for j in range(37)]  # a shared 38-token "system prompt"


async def greedy(stub, prompt, max_tokens=10, salt="", **extra):
    message = request(prompt, temperature=0, max_tokens=max_tokens, ignore_eos=True, **extra)
    message.cache_salt = salt
    messages, tokens = await generate(stub, message)
    return tokens[0], messages[0].prompt.cached_tokens, messages[-1].usage


async def test_a_conversation_hits_the_cache_from_turn_two_with_the_uncached_outputs(tiny_model):
    async with engine_stub(tiny_model, "--block-size", "4", "--max-num-batched-tokens", "16") as (stub, _):
        prompt, seen = list(SYSTEM), []
        for turn in range(4):
            prompt += [(13 * turn + j) % 180 + 7 for j in range(6)]  # the user's turn
            out, cached, usage = await greedy(stub, prompt)
            assert out == reference(tiny_model, prompt, 10)
            assert usage.cached_tokens == cached and usage.prompt_tokens == len(prompt)
            seen.append(cached)
            prompt += out  # the assistant's answer joins the history
        load = await stub.GetLoad(engine_pb2.GetLoadRequest())
    assert seen[0] == 0 and all(c > 0 for c in seen[1:])
    # Turn k finds every full block of turn k-1's prompt + answer (all but the last, uncomputed token).
    assert seen[1] == (len(SYSTEM) + 6 + 10 - 1) // 4 * 4
    assert load.prefix_caching and load.kv_blocks_cached > 0 and load.kv_blocks_used == 0
    assert load.prefix_cache_hit_tokens == sum(seen) and load.prefix_cache_queried_tokens > sum(seen)


async def test_prefix_caching_off_reports_no_hits(tiny_model):
    async with engine_stub(tiny_model, "--no-prefix-caching") as (stub, _):
        await greedy(stub, SYSTEM)
        _, cached, _ = await greedy(stub, SYSTEM + [9, 9])
        load = await stub.GetLoad(engine_pb2.GetLoadRequest())
    assert cached == 0 and not load.prefix_caching and load.kv_blocks_cached == 0


async def test_two_salts_never_share_a_block(tiny_model):
    async with engine_stub(tiny_model, "--block-size", "4") as (stub, service):
        pool = service.loaded.engine.scheduler.pool
        out_a, first, _ = await greedy(stub, SYSTEM, salt="tenant-a")
        blocks_a = set(pool.hash_of)
        out_b, cached_b, _ = await greedy(stub, SYSTEM, salt="tenant-b")
        blocks_b = set(pool.hash_of) - blocks_a
        _, cached_none, _ = await greedy(stub, SYSTEM)
        _, cached_a2, _ = await greedy(stub, SYSTEM + [50, 51], salt="tenant-a")
    assert first == cached_b == cached_none == 0
    assert len(blocks_b) == len(blocks_a) and not blocks_a & blocks_b
    assert cached_a2 == len(SYSTEM) // 4 * 4 and out_a == out_b


async def test_prompt_logprobs_are_computed_even_when_the_prefix_is_cached(tiny_model):
    async with engine_stub(tiny_model, "--block-size", "4") as (stub, _):
        message = request(SYSTEM, temperature=0, max_tokens=3, prompt_logprobs=2)
        first, _ = await generate(stub, message)
        await greedy(stub, SYSTEM)  # the prompt's blocks are cached now
        second, _ = await generate(stub, message)
    assert second[0].prompt.cached_tokens == 0
    assert second[0].prompt.logprobs == first[0].prompt.logprobs
    assert len(second[0].prompt.logprobs.logprobs) == len(SYSTEM) - 1


@pytest.mark.parametrize("decode_steps", ["1", "4"])
async def test_200_random_cancellations_with_shared_prefixes_leave_nothing_referenced(tiny_model, decode_steps):
    rng = random.Random(11)
    # no queue-wait budget: 200 arrivals at once on a loaded machine can be estimated past it (as test_cancel's)
    flags = ("--max-num-seqs", "64", "--block-size", "4", "--num-kv-blocks", "160", "--decode-steps", decode_steps)
    async with engine_stub(tiny_model, *flags, "--max-queue-wait-s", "0") as (stub, service):

        async def one(i):
            prompt = SYSTEM[: rng.randrange(1, len(SYSTEM))] + [
                rng.randrange(3, 200) for _ in range(rng.randrange(0, 30))
            ]
            call = stub.Generate(request(prompt, f"c{i}", n=rng.choice([1, 2]), temperature=1.0, max_tokens=200))
            stop_after = rng.randrange(0, 6)
            async for _ in call:
                if stop_after == 0:
                    break
                stop_after -= 1
            call.cancel()

        await asyncio.gather(*[one(i) for i in range(200)])
        load = await _until_idle(stub)
        pool = service.loaded.engine.scheduler.pool
        refs = sum(pool.refs)
    assert (load.running, load.waiting, load.kv_blocks_used, refs) == (0, 0, 0, 0)
    assert load.kv_blocks_free == pool.usable and load.prefix_cache_hit_tokens > 0


async def test_eviction_under_pressure_keeps_serving_exact_outputs(tiny_model):
    # 23 usable blocks of 4 tokens; 30 distinct 30-token prompts cannot all stay cached.
    async with engine_stub(tiny_model, "--num-kv-blocks", "24", "--block-size", "4", "--max-num-seqs", "4") as (
        stub,
        service,
    ):
        prompts = [[1] + [(3 * i + 7 * j) % 190 + 5 for j in range(29)] for i in range(30)]
        for _ in range(2):
            results = await asyncio.gather(*[greedy(stub, p, max_tokens=6) for p in prompts])
            for prompt, (out, _, _) in zip(prompts, results):
                assert out == reference(tiny_model, prompt, 6)
        pool = service.loaded.engine.scheduler.pool
        assert pool.num_cached <= pool.usable
        # The last prompts served are still cached; their repeat hits.
        _, cached, _ = await greedy(stub, prompts[-1], max_tokens=6)
        load = await _until_idle(stub)
    assert cached > 0 and load.kv_blocks_used == 0


@pytest.mark.parametrize("decode_steps", ["1", "3"])
async def test_preemption_keeps_cached_blocks_and_outputs_exact(tiny_model, decode_steps):
    # 11 usable blocks; four sequences sharing a 16-token prefix preempt each other while they decode.
    async with engine_stub(
        tiny_model, "--num-kv-blocks", "12", "--block-size", "4", "--decode-steps", decode_steps
    ) as (stub, service):
        prompts = [SYSTEM[:16] + [(5 * i + j) % 200 + 3 for j in range(3)] for i in range(4)]
        results = await asyncio.gather(*[greedy(stub, p, max_tokens=16) for p in prompts])
        assert service.loaded.engine.scheduler.num_preemptions > 0
        load = await _until_idle(stub)
    for prompt, (out, _, _) in zip(prompts, results):
        assert out == reference(tiny_model, prompt, 16)
    assert load.kv_blocks_used == 0 and load.prefix_cache_hit_tokens > 0


@pytest.mark.slow
async def test_multi_turn_chat_on_the_default_model_hits_and_matches_the_uncached_engine():
    import torch
    from transformers import AutoModelForCausalLM

    from scaleout_common.models import load_tokenizer, resolve_model

    folder = resolve_model(None)
    tokenizer = load_tokenizer(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    questions = ["What is the capital of France?", "And of Italy?", "Which of the two is larger?", "Thanks!"]

    async def conversation(*flags: str):
        messages = [{"role": "system", "content": "You are a concise assistant. " * 8}]
        outputs, cached = [], []
        async with engine_stub(model, *flags) as (stub, _):
            for question in questions:
                messages.append({"role": "user", "content": question})
                prompt = tokenizer.apply_chat_template(
                    messages, add_generation_prompt=True, tokenize=True, return_dict=False
                )
                out, hit, _ = await greedy(stub, prompt, max_tokens=24)
                outputs.append(out)
                cached.append(hit)
                messages.append({"role": "assistant", "content": tokenizer.decode(out, skip_special_tokens=True)})
        return outputs, cached

    cached_run, uncached_run = await conversation(), await conversation("--no-prefix-caching")
    assert cached_run[0] == uncached_run[0]
    assert cached_run[1][0] == 0 and all(hit > 0 for hit in cached_run[1][1:])
    assert uncached_run[1] == [0] * len(questions)


@pytest.mark.parametrize("decode_steps", ["1", "4"])
async def test_a_prompt_cached_but_its_last_token_starts_as_a_decode(tiny_model, decode_steps):
    prompt = SYSTEM[:17]  # 4 full blocks of 4, then the one token that must run
    async with engine_stub(tiny_model, "--block-size", "4", "--decode-steps", decode_steps) as (stub, _):
        first, _, _ = await greedy(stub, prompt, max_tokens=8)
        results = await asyncio.gather(*[greedy(stub, prompt, max_tokens=8) for _ in range(3)])
    assert first == reference(tiny_model, prompt, 8)
    assert all(out == first and cached == 16 for out, cached, _ in results)
