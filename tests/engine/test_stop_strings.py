"""Stop strings matched in the engine (engine_svc/scheduling/stop_strings.py): a tiny random model over the
default model's real tokenizer, so its outputs decode to text; on the typed face here, on vLLM's in
test_vllm_grpc.py."""

from __future__ import annotations

import grpc
import pytest

from scaleout.v1 import common_pb2, engine_pb2_grpc
from tests.engine.conftest import engine_stub, generate, request

PROMPT = [1, 504, 3458, 282, 4649, 314, 30, 2]
STOP = common_pb2.FINISH_REASON_STOP


def first_match(tokenizer, prompt: list[int], output: list[int], stop: str) -> int:
    """How many output tokens the engine keeps: up to the one whose text completes `stop`."""
    for k in range(1, len(output) + 1):
        if stop in tokenizer.decode(prompt[-4:] + output[:k])[len(tokenizer.decode(prompt[-4:])) :]:
            return k
    raise AssertionError(f"{stop!r} is not in the output")


async def test_a_stop_string_ends_the_choice_with_the_token_that_completes_it(worded_engine, tokenizer):
    stub = engine_pb2_grpc.EngineServiceStub(worded_engine)
    _, free = await generate(stub, request(PROMPT, temperature=0, max_tokens=24, ignore_eos=True))
    text = tokenizer.decode(free[0][8:10])  # a string that starts inside the output, not at a token's start
    stop = text.strip()[1:4] or text
    messages, tokens = await generate(stub, request(PROMPT, temperature=0, max_tokens=24, ignore_eos=True, stop=[stop]))
    final = messages[-1].choices[-1]
    assert final.finish_reason == STOP and final.stop_str == stop
    assert tokens[0] == free[0][: first_match(tokenizer, PROMPT, free[0], stop)]


async def test_min_tokens_hold_stop_strings_back_and_an_unmatched_one_runs_to_length(worded_engine):
    stub = engine_pb2_grpc.EngineServiceStub(worded_engine)
    messages, tokens = await generate(
        stub, request(PROMPT, temperature=0, max_tokens=6, ignore_eos=True, stop=["\u2603never"])
    )
    assert messages[-1].choices[-1].finish_reason == common_pb2.FINISH_REASON_LENGTH and len(tokens[0]) == 6


async def test_each_choice_of_n_matches_on_its_own_text(worded_engine, tokenizer):
    stub = engine_pb2_grpc.EngineServiceStub(worded_engine)
    _, free = await generate(stub, request(PROMPT, n=3, max_tokens=16, ignore_eos=True, seed=7))
    stop = tokenizer.decode(free[1][3:4])
    messages, tokens = await generate(stub, request(PROMPT, n=3, max_tokens=16, ignore_eos=True, seed=7, stop=[stop]))
    finals = {c.index: c for m in messages for c in m.choices if c.finish_reason}
    assert finals[1].stop_str == stop and len(tokens[1]) <= 4
    for i in (0, 2):
        assert tokens[i] == free[i][: len(tokens[i])]


async def test_an_engine_without_a_tokenizer_refuses_stop_strings(tiny_model):
    async with engine_stub(tiny_model) as (stub, _):
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await generate(stub, request([1, 5, 9], max_tokens=2, stop=["x"]))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "no tokenizer" in error.value.details()
