"""Draft-model speculative decoding: vLLM's config keys, the draft refused for another vocabulary or tokenizer, and
the engine's outputs with a draft equal to those without (greedy, seeded sampling, stops, lengths, logprobs,
preemptions), with a draft that agrees with the target (a copy of it) and with one that mostly does not."""

from __future__ import annotations

import asyncio
import json
import shutil

import grpc
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from engine_svc.__main__ import make_parser
from engine_svc.scheduling.speculation import SpecConfig, parse_speculative_config
from engine_svc.scheduling.stop_strings import StopStrings
from engine_svc.serving.loader import build_engine
from engine_svc.serving.service import EngineService
from scaleout.v1 import common_pb2, control_pb2, control_pb2_grpc, engine_pb2, engine_pb2_grpc
from scaleout_common.models import resolve_model
from tests.engine.conftest import engine_args, engine_stub, generate, request, tiny_llama, worded_model
from tests.engine.test_generate import reference
from tests.engine.test_speculation import CASES, MAX, PLAIN, assert_refused
from tests.serving import serving

FLAGS = ("--block-size", "4", "--max-num-batched-tokens", "64")


def spec(folder, k: int = 3) -> str:
    return json.dumps({"method": "draft_model", "model": str(folder), "num_speculative_tokens": k})


@pytest.fixture(scope="module")
def drafts(tmp_path_factory):
    """Draft folders: a copy of the tiny target, another tiny model (one layer, other weights), one of another
    vocabulary, and the worded model over the default tokenizer (as is, and with two tokens' ids swapped)."""
    root = tmp_path_factory.mktemp("drafts")
    tiny_llama().save_pretrained(root / "same")
    config = tiny_llama().config.to_dict() | {"num_hidden_layers": 1}
    torch.manual_seed(1)
    LlamaForCausalLM(LlamaConfig(**config)).save_pretrained(root / "other")
    LlamaForCausalLM(LlamaConfig(**config | {"vocab_size": 128})).save_pretrained(root / "narrow")
    default = resolve_model(None)
    worded = worded_model(LlamaConfig.from_pretrained(default).vocab_size)
    for name in ("worded", "swapped"):
        worded.save_pretrained(root / name)
        for file in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(default / file, root / name / file)
    tokenizer = json.loads((root / "swapped" / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    first, second = [t for t in vocab if t.isalpha() and len(t) > 3][:2]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    (root / "swapped" / "tokenizer.json").write_text(json.dumps(tokenizer))
    return root


def test_the_config_takes_vllms_draft_model_keys_and_refuses_others():
    expected = SpecConfig(3, method="draft_model", model="/d")
    assert parse_speculative_config('{"method": "draft_model", "model": "/d", "num_speculative_tokens": 3}') == expected
    assert parse_speculative_config('{"model": "/d", "num_speculative_tokens": 3}') == expected  # vLLM's default
    assert parse_speculative_config(
        '{"model": "/d", "num_speculative_tokens": 3, "draft_sample_method": "greedy"}'
    ) == (expected)
    refusals = {
        '{"method": "draft_model", "num_speculative_tokens": 3}': "needs a model",
        '{"model": "/d", "num_speculative_tokens": 3, "prompt_lookup_max": 3}': "unsupported keys prompt_lookup_max",
        '{"model": "/d", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1}': "draft_tensor_parallel_size",
        '{"model": "/d", "num_speculative_tokens": 2, "draft_sample_method": "probabilistic"}': "only 'greedy'",
        '{"model": "/d"}': "num_speculative_tokens must be",
        '{"method": "ngram", "model": "/d", "num_speculative_tokens": 2}': "unsupported keys model",
        '{"method": "eagle3", "model": "/d", "num_speculative_tokens": 2}': "method 'eagle3'",
    }
    assert_refused(refusals)


@pytest.mark.slow
def test_a_draft_of_another_vocabulary_or_tokenizer_is_refused_at_start(drafts, tokenizer):
    with pytest.raises(ValueError, match="vocabulary of 128 tokens, the target 256"):
        build_engine(tiny_llama(), engine_args("--speculative-config", spec(drafts / "narrow")), model_name="t")
    args = engine_args("--speculative-config", spec(drafts / "swapped"))
    with pytest.raises(ValueError, match="another tokenizer than the target"):
        build_engine(worded_model(len(tokenizer)), args, model_name="w", model_path=str(resolve_model(None)))


async def _run(model, cases, *flags, sleep: bool = False):
    """The cases' outputs, the speculator, the load after them, and the draft tokens proposed and accepted for
    one greedy request after them (alone: a copy of the target has every greedy draft accepted); with `sleep`,
    the engine sleeps (level 1: both caches freed) and wakes up before that request."""
    async with engine_stub(model, *FLAGS, *flags) as (stub, service):
        runs = await asyncio.gather(*(generate(stub, request(p, **s)) for p, s in cases))
        load = await stub.GetLoad(engine_pb2.GetLoadRequest())
        if sleep:
            control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
            await control.Sleep(control_pb2.SleepRequest(level=1))
            assert service.loaded.engine.speculator.drafter.runner.kv_caches == []
            assert (await control.WakeUp(control_pb2.WakeUpRequest())).awake
        await generate(stub, request(PLAIN, temperature=0, max_tokens=MAX, ignore_eos=True))
        after = await stub.GetLoad(engine_pb2.GetLoadRequest())
        greedy = (
            after.spec_decode_num_draft_tokens - load.spec_decode_num_draft_tokens,
            after.spec_decode_num_accepted_tokens - load.spec_decode_num_accepted_tokens,
        )
        return runs, service.loaded.engine.speculator, load, greedy


@pytest.fixture(scope="module")
async def plain(tiny_model):
    return (await _run(tiny_model, CASES))[0]


def _same_outputs(runs_a, runs_b):
    for (msgs_a, toks_a), (msgs_b, toks_b) in zip(runs_a, runs_b):
        assert toks_a == toks_b
        assert msgs_a[-1].choices[0].finish_reason == msgs_b[-1].choices[0].finish_reason
        lps_a, lps_b = ([c.logprobs for m in msgs for c in m.choices] for msgs in (msgs_a, msgs_b))
        assert [r for lp in lps_a for r in lp.ranks] == [r for lp in lps_b for r in lp.ranks]  # a message holds more
        values_a, values_b = ([x for lp in lps for x in lp.logprobs] for lps in (lps_a, lps_b))
        assert values_a == pytest.approx(values_b, abs=1e-4)


@pytest.mark.slow
async def test_a_copy_of_the_target_as_draft_gives_the_plain_outputs_at_high_acceptance(tiny_model, drafts, plain):
    runs, speculator, load, (proposed, accepted) = await _run(
        tiny_model, CASES, "--speculative-config", spec(drafts / "same"), sleep=True
    )
    _same_outputs(plain, runs)
    assert len(runs[3][1][0]) < MAX  # the stop token ended a drafted run early
    assert load.kv_blocks_used == 0  # every block grown for drafts went back
    assert proposed == accepted > MAX // 2  # the draft's cache (woken up) holds what the target's does
    assert sum(speculator.accepted_per_pos) == speculator.num_accepted_tokens
    assert load.spec_decode_num_draft_tokens + proposed == speculator.num_draft_tokens  # GetLoad counts them


@pytest.mark.slow
async def test_a_poor_draft_through_preemptions_gives_the_plain_outputs(tiny_model, drafts, plain):
    """Another model drafts (mostly rejected: its sequences back off), and a cache too small for every sequence
    preempts some: their draft caches start over, the outputs stay the plain ones."""
    flags = ("--num-kv-blocks", "26", "--speculative-config", spec(drafts / "other", 4))
    runs, speculator, load, _ = await _run(tiny_model, CASES, *flags)
    _same_outputs(plain, runs)
    assert load.preemptions > 0 and load.kv_blocks_used == 0
    assert 0 < speculator.num_accepted_tokens < speculator.num_draft_tokens  # some rejected (how many: the batching's)


@pytest.mark.slow
async def test_the_transformers_backend_drafts_with_a_transformers_draft(tiny_model, drafts):
    cases = CASES[:1]
    flags = ("--backend", "transformers", "--speculative-config", spec(drafts / "same"))
    runs, _, _, (proposed, accepted) = await _run(tiny_model, cases, *flags)
    assert [toks[0] for _, toks in runs] == [reference(tiny_model, p, s["max_tokens"]) for p, s in cases]
    assert proposed == accepted > MAX // 2


@pytest.mark.slow
async def test_stop_strings_end_a_drafted_run_at_the_token_that_completes_them(drafts, tokenizer):
    """The worded model drafting for itself (the default tokenizer's folder beside both: the check passes): a stop
    string inside a run of accepted drafts ends the choice at the token that completes it (the tokens before are
    the free run's: the plain decode's, as the tests above show)."""
    model, prompt = worded_model(len(tokenizer)), [1] + [504, 3458, 282, 4649] * 5
    greedy = dict(temperature=0, max_tokens=MAX, ignore_eos=True)
    args = engine_args("--block-size", "4", "--speculative-config", spec(drafts / "worded", 4))
    stops, folder = StopStrings.of(tokenizer), str(resolve_model(None))
    service = EngineService(
        args, build=lambda: build_engine(model, args, model_name="w", stop_strings=stops, model_path=folder)
    )
    async with serving(service, make_parser()) as target, grpc.aio.insecure_channel(target) as channel:
        stub = engine_pb2_grpc.EngineServiceStub(channel)
        _, free = await generate(stub, request(prompt, **greedy))
        stop = tokenizer.decode(free[0][12:14]).strip()[1:4] or tokenizer.decode(free[0][12:14])
        messages, tokens = await generate(stub, request(prompt, **greedy, stop=[stop]))
        speculator = service.loaded.engine.speculator
    out = tokens[0]
    assert out == free[0][: len(out)] and len(out) < MAX
    assert stop in tokenizer.decode(out) and stop not in tokenizer.decode(out[:-1])
    assert messages[-1].choices[-1].finish_reason == common_pb2.FINISH_REASON_STOP
    assert speculator.num_accepted_tokens > 0
