"""N-gram speculative decoding: the proposer, the flag, verification's distribution, and the engine's outputs
with speculation equal to those without (greedy, seeded sampling, stops, lengths, logprobs)."""

from __future__ import annotations

import asyncio
import json

import grpc
import jsonschema
import numpy as np
import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families

from engine_svc.__main__ import make_parser
from engine_svc.model.sampler import Sampler
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence
from engine_svc.scheduling.speculation import (
    MIN_ACCEPTED,
    WINDOW,
    SpecConfig,
    Speculator,
    _Drafting,
    parse_speculative_config,
    propose,
)
from engine_svc.scheduling.stop_strings import StopStrings
from engine_svc.serving.loader import build_engine
from engine_svc.serving.service import EngineService
from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc
from tests.engine.conftest import engine_args, engine_stub, generate, request, tiny_llama, worded_model
from tests.engine.test_generate import reference
from tests.engine.test_structured_outputs import PROMPTS, constrained, guided_stub, text
from tests.serving import serving

SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3, "prompt_lookup_min": 1}'
LOOP = [1] + [5, 6, 7, 8, 9] * 6  # repetitive: drafts from the prompt
PLAIN = [1] + list(range(10, 40))  # no repeats in the prompt: drafts only once the output loops


def test_propose_takes_the_earliest_of_the_longest_matches():
    tokens = np.array([1, 2, 3, 9, 2, 3, 4, 1, 2, 3])
    assert propose(tokens, 2, 1, 3) == [9, 2]  # "1 2 3" at 0 beats "2 3" at 4
    assert propose(tokens, 5, 2, 2) == [9, 2, 3, 4, 1]  # "2 3" at 1 is the earliest bigram
    assert propose(np.array([4, 5, 6, 7]), 3, 1, 3) == []  # nothing repeats
    assert propose(np.array([7, 7]), 3, 1, 3) == [7]  # up to the end of what is there
    assert propose(np.array([1, 2, 3, 1, 2]), 3, 3, 3) == []  # only a bigram matches: below the minimum


def test_the_config_is_vllms_and_refuses_what_we_do_not_support():
    assert parse_speculative_config("") is None
    assert parse_speculative_config(SPEC) == SpecConfig(4, 1, 3)
    assert parse_speculative_config('{"method": "ngram", "num_speculative_tokens": 2}') == SpecConfig(2, 5, 5)
    assert parse_speculative_config('{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}') == (
        SpecConfig(2, 3, 3)
    )
    refusals = {
        '{"method": "eagle3", "num_speculative_tokens": 2}': "method 'eagle3'",
        '{"method": "ngram", "model": "x", "num_speculative_tokens": 2}': "unsupported keys model",
        '{"method": "ngram"}': "num_speculative_tokens must be",
        '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 2}': "<=",
        "[1]": "JSON object",
    }
    assert_refused(refusals)


def assert_refused(refusals: dict[str, str]) -> None:
    """Each --speculative-config refused with a message holding its words."""
    for config, words in refusals.items():
        with pytest.raises(ValueError, match=words):
            parse_speculative_config(config)


def test_a_window_of_poor_acceptance_pauses_drafting_with_a_growing_backoff():
    state = _Drafting()
    for _ in range(WINDOW):
        state.judge(0, 100)
    first = state.resume_at - 100
    assert first > 0 and not state.accepted
    for _ in range(WINDOW):
        state.judge(0, 200)
    assert state.resume_at == 200 + 2 * first
    for _ in range(WINDOW):
        state.judge(int(2 * MIN_ACCEPTED) + 1, 300)
    assert state.resume_at == 200 + 2 * first


def test_verification_preserves_the_target_distribution():
    """Rejection sampling of a one-hot draft: the first token follows p0 whatever the draft, the draft is
    accepted with probability p0(draft), and the token after an accepted draft follows p1 (chi-square)."""
    vocab, n, drafts = 8, 6000, [3, 5]
    rows = torch.tensor([[0.5, 0.1, -1.0, 1.2, 0.0, 0.3, -0.5, 0.8], [1.0, -0.2, 0.4, 0.0, 0.9, 0.1, -1.0, 0.6]])
    p0, p1 = rows.softmax(-1).double().numpy()
    config = SamplingConfig(temperature=1.0, max_tokens=8)
    seqs = []
    for i in range(n):
        seq = Sequence(f"r{i}", 0, [1, 2], SamplingConfig(temperature=1.0, max_tokens=8, seed=i), output_ids=[4])
        seq.output_ids += drafts
        seq.num_tokens += len(drafts)
        seqs.append(seq)
    speculator = Speculator(SpecConfig(2, 1, 1), 64)
    speculator.states = {seq: _Drafting() for seq in seqs}
    chunks = [Chunk(seq, 2, 3, num_draft=2) for seq in seqs]
    runs = {seq: ([-1], [None]) for seq in seqs}  # the bonus token is not looked at here
    speculator.verify(Sampler(vocab, torch.device("cpu")), chunks, rows.repeat(n, 1), runs)
    first = np.bincount([runs[s][0][0] for s in seqs], minlength=vocab)
    second = np.bincount([runs[s][0][1] for s in seqs if runs[s][0][0] == drafts[0]], minlength=vocab)
    critical = 24.32  # chi-square, 7 degrees of freedom, p = 0.001
    for counts, p in ((first, p0), (second, p1)):
        expected = counts.sum() * p
        assert ((counts - expected) ** 2 / expected).sum() < critical, (counts, expected)
    assert abs(speculator.accepted_per_pos[0] / n - p0[drafts[0]]) < 4 * (p0[3] * (1 - p0[3]) / n) ** 0.5
    assert config.greedy is False and all(s.output_ids == [4] for s in seqs)  # the drafts were taken back out


MAX = 24
CASES = [  # (prompt, sampling): greedy loops, stops, lengths, logprobs, seeded sampling
    (LOOP, dict(temperature=0, max_tokens=MAX, ignore_eos=True)),
    (PLAIN, dict(temperature=0, max_tokens=MAX, ignore_eos=True, logprobs=2)),
    ([1, 3, 4, 3, 4, 3, 4, 3], dict(temperature=0, max_tokens=7, ignore_eos=True)),
    (LOOP, dict(temperature=0, max_tokens=MAX, stop_token_ids=[155])),
    (LOOP, dict(temperature=0.8, max_tokens=MAX, ignore_eos=True, seed=7, logprobs=1)),
    (PLAIN, dict(temperature=1.0, top_k=5, max_tokens=MAX, ignore_eos=True, seed=3, repetition_penalty=1.1)),
]


async def _outputs(model, cases, *flags):
    async with engine_stub(model, "--block-size", "4", "--max-num-batched-tokens", "64", *flags) as (stub, service):
        runs = await asyncio.gather(*(generate(stub, request(p, **s)) for p, s in cases))
        engine = service.loaded.engine
        load = await stub.GetLoad(engine_pb2.GetLoadRequest())
        if engine.speculator is not None:  # the counters reach GetLoad and vLLM's series
            families = {f.name: f for f in text_string_to_metric_families(service.vllm.exposition().decode())}
            per_pos = families["vllm:spec_decode_num_accepted_tokens_per_pos"].samples
            assert [s.value for s in per_pos] == list(load.spec_decode_num_accepted_tokens_per_pos)
            (drafts,) = families["vllm:spec_decode_num_draft_tokens"].samples
            assert drafts.value == load.spec_decode_num_draft_tokens == engine.speculator.num_draft_tokens
        return runs, engine.speculator, load.kv_blocks_used


async def test_outputs_with_speculation_equal_those_without(tiny_model):
    plain, _, _ = await _outputs(tiny_model, CASES)
    spec, speculator, used = await _outputs(tiny_model, CASES, "--speculative-config", SPEC)
    for (prompt, sampling), (msgs_a, toks_a), (msgs_b, toks_b) in zip(CASES, plain, spec):
        assert toks_a == toks_b, sampling
        if sampling["temperature"] == 0 and not sampling.get("stop_token_ids"):
            assert toks_b[0] == reference(tiny_model, prompt, sampling["max_tokens"])
        assert msgs_a[-1].choices[0].finish_reason == msgs_b[-1].choices[0].finish_reason
        lps_a, lps_b = ([c.logprobs for m in msgs for c in m.choices] for msgs in (msgs_a, msgs_b))
        assert [r for lp in lps_a for r in lp.ranks] == [r for lp in lps_b for r in lp.ranks]
        assert [list(t.token_ids) for lp in lps_a for t in lp.top] == [
            list(t.token_ids) for lp in lps_b for t in lp.top
        ]
        values_a, values_b = ([x for lp in lps for x in lp.logprobs] for lps in (lps_a, lps_b))
        assert len(values_a) == len(values_b) and values_a == pytest.approx(values_b, abs=1e-4)
    assert len(spec[3][1][0]) < MAX  # the stop token ended the loop early
    assert used == 0  # every block grown for drafts went back
    assert 0 < speculator.num_accepted_tokens < speculator.num_draft_tokens  # accepted and rejected both
    assert sum(speculator.accepted_per_pos) == speculator.num_accepted_tokens


@pytest.mark.parametrize("core", ["thread", "process"])
async def test_per_request_counts_come_with_each_choices_finish_and_add_up_to_the_engines(core):
    """--per-request-spec-decode-metrics detailed (vLLM's): each choice's final message has its verify steps
    (SpeculationCounts), none before; they add up to the engine's counters; one never drafted reports zero steps.
    Across the core process's pipe too."""
    flags = ("--engine-core", core, "--block-size", "4", "--speculative-config", SPEC)
    async with engine_stub(None, *flags, "--per-request-spec-decode-metrics", "detailed") as (stub, _service):
        cases = [(LOOP, {"n": 2}), (LOOP, {}), ([1, 2], {"max_tokens": 1})]
        greedy = {"temperature": 0, "max_tokens": MAX, "ignore_eos": True}
        runs = [await generate(stub, request(p, **(greedy | extra))) for p, extra in cases]
        load = await stub.GetLoad(engine_pb2.GetLoadRequest())
    finals = []
    for messages, _ in runs:
        assert all(c.HasField("speculation") == bool(c.finish_reason) for m in messages for c in m.choices)
        finals += [c.speculation for m in messages for c in m.choices if c.finish_reason]
    assert len(finals) == 4 and all(len(f.acceptance_histogram) == 5 and f.num_spec_tokens == 4 for f in finals)
    for f in finals:
        assert sum(f.acceptance_histogram) == len(f.per_step_accepted) == len(f.per_step_drafted)
        assert f.num_draft_tokens == sum(f.per_step_drafted)
        assert [f.acceptance_histogram[j] for j in range(5)] == [list(f.per_step_accepted).count(j) for j in range(5)]
    assert sum(f.num_draft_tokens for f in finals) == load.spec_decode_num_draft_tokens > 0
    accepted = sum(sum(f.per_step_accepted) for f in finals)
    assert accepted == load.spec_decode_num_accepted_tokens > 0
    assert sum(sum(f.acceptance_histogram) for f in finals) == load.spec_decode_num_drafts
    assert list(finals[-1].acceptance_histogram) == [0] * 5 and finals[-1].num_draft_tokens == 0  # one token


def test_per_request_counts_need_speculation():
    args = engine_args("--per-request-spec-decode-metrics", "summary")
    with pytest.raises(ValueError, match="requires speculative decoding"):
        build_engine(tiny_llama(), args, model_name="test")


async def test_the_transformers_backend_drops_rejected_tokens_from_its_cache(tiny_model):
    cases = CASES[:3]
    spec, speculator, _ = await _outputs(tiny_model, cases, "--backend", "transformers", "--speculative-config", SPEC)
    assert [toks[0] for _, toks in spec] == [reference(tiny_model, p, s["max_tokens"]) for p, s in cases]
    assert 0 < speculator.num_accepted_tokens < speculator.num_draft_tokens


async def test_stop_strings_end_a_drafted_run_where_they_end_a_plain_one(tokenizer):
    """A tiny model over the default model's tokenizer (its text decodes): the stop string lands inside a run of
    accepted drafts and the choice ends at the token that completes it, as without speculation."""
    model, prompt = worded_model(len(tokenizer)), [1] + [504, 3458, 282, 4649] * 5

    def build(args):
        return lambda: build_engine(model, args, model_name="worded", stop_strings=StopStrings.of(tokenizer))

    async def run(*flags):
        args = engine_args("--block-size", "4", *flags)
        service = EngineService(args, build=build(args))
        async with serving(service, make_parser()) as target, grpc.aio.insecure_channel(target) as channel:
            stub = engine_pb2_grpc.EngineServiceStub(channel)
            _, free = await generate(stub, request(prompt, temperature=0, max_tokens=MAX, ignore_eos=True))
            stop = tokenizer.decode(free[0][12:14]).strip()[1:4] or tokenizer.decode(free[0][12:14])
            messages, tokens = await generate(
                stub, request(prompt, temperature=0, max_tokens=MAX, ignore_eos=True, stop=[stop])
            )
            speculator = service.loaded.engine.speculator
            return free[0], tokens[0], messages[-1].choices[-1], speculator and speculator.num_accepted_tokens

    plain = await run()
    spec = await run("--speculative-config", SPEC)
    assert plain[:3] == spec[:3] and spec[2].finish_reason == common_pb2.FINISH_REASON_STOP
    assert len(spec[1]) < MAX and spec[3] > 0  # it stopped early, and drafts were accepted


async def test_guided_requests_beside_drafted_ones_keep_their_grammar():
    """Structured outputs with speculation on: guided sequences are not drafted (their masks hold), unguided
    ones in the same steps are, and keep their greedy outputs."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["a"],
    }
    async with guided_stub("--block-size", "4", "--speculative-config", SPEC) as (stub, service):
        guided = [constrained(p, json_schema=json.dumps(schema)) for p in PROMPTS[:3]]
        runs = await asyncio.gather(
            *(generate(stub, m) for m in guided),
            *(generate(stub, request(p, **s)) for p, s in CASES[:2]),
        )
        speculator = service.loaded.engine.speculator
    for _, tokens in runs[:3]:
        jsonschema.validate(json.loads(text(tokens[0])), schema)
    model = tiny_llama()
    assert [t[0] for _, t in runs[3:]] == [reference(model, p, s["max_tokens"]) for p, s in CASES[:2]]
    assert speculator.num_accepted_tokens > 0
