"""Structured outputs in the engine, on a tiny random Llama whose vocabulary is single characters: a constraint
must hold whatever the weights, so random outputs exercise the masks, the reasoning gate and every path of
the step loop (per-step, decode runs, prefill chunks, preemption, the engine core process)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import re

import grpc
import jsonschema
import pytest
import torch
from grpc_status import rpc_status

from engine_svc.__main__ import make_parser
from engine_svc.model.sampler import Sampler
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Sequence
from engine_svc.serving.loader import build_engine
from engine_svc.serving.service import EngineService
from engine_svc.structured.xgrammar_backend import XGrammarBackend
from scaleout.v1 import common_pb2, engine_pb2_grpc
from scaleout_common.errors import ServiceError
from tests.engine.conftest import TINY_EOS, TINY_VOCAB, generate, request, tiny_llama
from tests.serving import serving

THINK, END_THINK = 3, 4  # two tags of the tiny vocabulary
SPECIAL = {0: "<pad>", 1: "<s>", TINY_EOS: "</s>", THINK: "<think>", END_THINK: "</think>"}
PROMPTS = [[1, 40 + i, 50 + 2 * i, 60, 70 + i] for i in range(8)]


def tiny_vocab() -> list[str]:
    """Id i is chr(i) for printable ASCII (32-126); the others are tags and placeholders."""
    return [SPECIAL.get(i) or (chr(i) if 32 <= i < 127 else f"<{i}>") for i in range(TINY_VOCAB)]


VOCAB = tiny_vocab()


def text(ids: list[int]) -> str:
    return "".join(VOCAB[i] for i in ids if i != TINY_EOS)


def build_guided(args):
    """The tiny engine with a grammar backend over its character vocabulary (module level: picklable)."""
    backend = XGrammarBackend.from_vocab(VOCAB, TINY_VOCAB, [TINY_EOS])
    return build_engine(tiny_llama(), args, model_name="test", grammar_backend=backend)


def build_plain(args):
    return build_engine(tiny_llama(), args, model_name="test")


@contextlib.asynccontextmanager
async def guided_stub(*flags: str, build=build_guided):
    parser = make_parser()
    args = parser.parse_args(["--port", "0", "--metrics-port", "-1", "--max-num-batched-tokens", "64", *flags])
    service = EngineService(args, build=functools.partial(build, args))
    parser.set_defaults(**vars(args))
    async with serving(service, parser) as target, grpc.aio.insecure_channel(target) as channel:
        yield engine_pb2_grpc.EngineServiceStub(channel), service


def constrained(prompt, *, max_tokens=40, reasoning: common_pb2.ReasoningTokens | None = None, **kind):
    """A sampled request under one constraint (choice=[...] or any StructuredOutputs field)."""
    message = request(prompt, max_tokens=max_tokens, temperature=1.0, seed=sum(prompt))
    so = message.sampling_params.structured_outputs
    choice = kind.pop("choice", None)
    if choice is not None:
        so.choice.values.extend(choice)
    for name, value in kind.items():
        setattr(so, name, value)
    if reasoning is not None:
        so.reasoning.CopyFrom(reasoning)
    return message


def finish(messages) -> int:
    return [c.finish_reason for m in messages for c in m.choices if c.finish_reason][-1]


async def refused(stub, message) -> ServiceError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await generate(stub, message)
    status = rpc_status.from_call(caught.value)
    assert status is not None
    return ServiceError.from_status(status)


SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["a"]},
    {"type": "object", "properties": {"k": {"enum": ["x", "yy", "zzz"]}, "b": {"type": "boolean"}}, "required": ["k"]},
    {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "minItems": 1, "maxItems": 3},
    {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": "^[a-c]{0,4}$"}},
        "required": ["s"],
    },
    {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"n": {"const": 7}}, "required": ["n"]}]},
]


@pytest.mark.parametrize("flags", [(), ("--decode-steps", "4"), ("--backend", "transformers")])
async def test_json_schemas_hold_for_random_outputs(flags):
    async with guided_stub(*flags) as (stub, _):
        jobs = [
            generate(stub, constrained(p, json_schema=json.dumps(s), disable_any_whitespace=True))
            for s in SCHEMAS
            for p in PROMPTS[:4]
        ]
        results = await asyncio.gather(*jobs)
    stopped = 0
    for i, (messages, tokens) in enumerate(results):
        if finish(messages) == common_pb2.FINISH_REASON_STOP:
            stopped += 1
            jsonschema.validate(json.loads(text(tokens[0])), SCHEMAS[i // 4])
            assert tokens[0][-1] == TINY_EOS
    assert stopped >= len(results) // 2


@pytest.mark.parametrize("flags", [(), ("--decode-steps", "4")])
async def test_regex_choice_json_object_and_grammar(flags):
    grammar = 'root ::= "(" item ("," item)* ")"\nitem ::= [0-9] | "x"'
    lark = 'start: pair\npair: "<" letter letter ">"\nletter: "a" | "b"'
    async with guided_stub(*flags) as (stub, _):
        runs = await asyncio.gather(
            *[generate(stub, constrained(p, regex=r"[ab]{2,4}-\d\d")) for p in PROMPTS],
            *[generate(stub, constrained(p, choice=["red", "green", "blue sky"])) for p in PROMPTS],
            *[generate(stub, constrained(p, json_object=True, disable_any_whitespace=True)) for p in PROMPTS],
            *[generate(stub, constrained(p, grammar=grammar)) for p in PROMPTS],
            *[generate(stub, constrained(p, grammar=lark)) for p in PROMPTS],
        )
    outputs = [(finish(m), text(t[0])) for m, t in runs]
    n = len(PROMPTS)
    for i, (reason, out) in enumerate(outputs):
        if reason != common_pb2.FINISH_REASON_STOP:
            continue
        kind = i // n
        if kind == 0:
            assert re.fullmatch(r"[ab]{2,4}-\d\d", out), out
        elif kind == 1:
            assert out in ("red", "green", "blue sky")
        elif kind == 2:
            assert isinstance(json.loads(out), dict)
        elif kind == 3:
            assert re.fullmatch(r"\((\d|x)(,(\d|x))*\)", out), out
        else:
            assert re.fullmatch(r"<[ab][ab]>", out), out
    assert all(reason == common_pb2.FINISH_REASON_STOP for reason, _ in outputs[: 2 * n])  # short languages end


@pytest.mark.parametrize("decode_steps", ["1", "4"])
async def test_unconstrained_neighbours_decode_exactly_as_alone(decode_steps):
    async with guided_stub("--decode-steps", decode_steps) as (stub, _):
        alone = await asyncio.gather(
            *[generate(stub, request(p, temperature=0, max_tokens=24, ignore_eos=True)) for p in PROMPTS[:4]]
        )
        mixed = await asyncio.gather(
            *[generate(stub, request(p, temperature=0, max_tokens=24, ignore_eos=True)) for p in PROMPTS[:4]],
            *[generate(stub, constrained(p, regex=r"[a-z]{20}")) for p in PROMPTS[4:]],
        )
    assert [t for _, t in mixed[:4]] == [t for _, t in alone]
    for _, tokens in mixed[4:]:
        assert re.fullmatch(r"[a-z]{1,20}", text(tokens[0]))


@pytest.mark.parametrize("decode_steps", ["1", "4"])
async def test_a_grammar_without_stop_tokens_ends_on_its_last_token(decode_steps):
    """With EOS ignored the grammar completes on its own: that token is the last one, in decode runs too (where
    the guides see each step's tokens before its bookkeeping)."""
    async with guided_stub("--decode-steps", decode_steps) as (stub, _):
        jobs = []
        for p in PROMPTS:
            message = constrained(p, regex=r"[a-z]{3}-[0-9]{2}")
            message.sampling_params.ignore_eos = True
            jobs.append(generate(stub, message))
        runs = await asyncio.gather(*jobs)
    for messages, tokens in runs:
        assert finish(messages) == common_pb2.FINISH_REASON_STOP
        assert re.fullmatch(r"[a-z]{3}-[0-9]{2}", text(tokens[0])), text(tokens[0])
        assert TINY_EOS not in tokens[0]


async def test_greedy_constrained_outputs_repeat_and_n_choices_each_hold():
    async with guided_stub() as (stub, _):
        message = constrained(PROMPTS[0], regex=r"[0-9]{3}\.[0-9]")
        message.n = 3
        message.sampling_params.temperature = 1.0
        _, tokens = await generate(stub, message)
        greedy = constrained(PROMPTS[1], choice=["alpha", "beta", "gamma"])
        greedy.sampling_params.temperature = 0
        first = await generate(stub, greedy)
        second = await generate(stub, greedy)
    assert sorted(tokens) == [0, 1, 2]
    for ids in tokens.values():
        assert re.fullmatch(r"[0-9]{3}\.[0-9]", text(ids))
    assert first[1] == second[1] and text(first[1][0]) in ("alpha", "beta", "gamma")


def reasoning(started: bool) -> common_pb2.ReasoningTokens:
    message = common_pb2.ReasoningTokens(started=started)
    message.start.add(token_ids=[THINK])
    message.end.add(token_ids=[END_THINK])
    return message


@pytest.mark.parametrize("flags", [(), ("--decode-steps", "4")])
async def test_reasoning_is_free_and_the_answer_is_constrained(flags):
    async with guided_stub(*flags) as (stub, _):
        jobs = []
        for i, p in enumerate(PROMPTS * 3):
            message = constrained(p, regex=r"[0-9]{2}", reasoning=reasoning(started=True), max_tokens=30)
            message.sampling_params.seed = i
            message.sampling_params.logit_bias[END_THINK] = 4.0  # the block closes after a few free tokens
            jobs.append(generate(stub, message))
        runs = await asyncio.gather(*jobs)
        ended = constrained(PROMPTS[0], regex=r"[0-9]{2}", reasoning=reasoning(started=True))
        ended.sampling_params.structured_outputs.reasoning_ended = True
        _, ended_tokens = await generate(stub, ended)
    free_tokens = []
    for _, tokens in runs:
        ids = tokens[0]
        if END_THINK not in ids:
            continue
        cut = ids.index(END_THINK)
        free_tokens += ids[:cut]
        assert re.fullmatch(r"[0-9]{0,2}", text(ids[cut + 1 :])), text(ids)
    assert any(not VOCAB[t].isdigit() for t in free_tokens)  # reasoning was not held to the grammar
    assert re.fullmatch(r"[0-9]{2}", text(ended_tokens[0]))  # reasoning_ended: constrained from the first token


async def test_an_output_that_opens_no_block_is_constrained_from_the_start():
    async with guided_stub() as (stub, _):
        message = constrained(PROMPTS[2], regex=r"[xyz]{5}", reasoning=reasoning(started=False))
        message.sampling_params.logit_bias[THINK] = -100  # never opens the block
        _, tokens = await generate(stub, message)
    assert re.fullmatch(r"[xyz]{5}", text(tokens[0]))


async def test_an_output_that_may_open_a_block_opens_it_or_answers():
    async with guided_stub() as (stub, _):
        jobs = []
        for i, p in enumerate(PROMPTS * 2):
            message = constrained(p, regex=r"[xyz]{3}", reasoning=reasoning(started=False), max_tokens=30)
            message.sampling_params.seed = 100 + i
            message.sampling_params.logit_bias[THINK] = 5.0
            message.sampling_params.logit_bias[END_THINK] = 5.0
            jobs.append(generate(stub, message))
        runs = await asyncio.gather(*jobs)
    opened = 0
    for _, tokens in runs:
        ids = tokens[0]
        if ids[0] == THINK:
            opened += 1
            if END_THINK in ids:
                assert re.fullmatch(r"[xyz]{0,3}", text(ids[ids.index(END_THINK) + 1 :]))
        else:
            assert re.fullmatch(r"[xyz]{3}", text(ids)), text(ids)
    assert 0 < opened < len(runs)


async def test_bad_words_are_never_completed():
    async with guided_stub() as (stub, _):
        _, free = await generate(stub, request(PROMPTS[3], temperature=0, max_tokens=30, ignore_eos=True))
        ids = free[0]
        message = request(PROMPTS[3], temperature=0, max_tokens=30, ignore_eos=True)
        message.sampling_params.bad_words.add(token_ids=[ids[0]])
        message.sampling_params.bad_words.add(token_ids=[ids[2], ids[3]])
        _, banned = await generate(stub, message)
    out = banned[0]
    assert ids[0] not in out
    assert all(pair != (ids[2], ids[3]) for pair in itertools.pairwise(out))


async def test_preemption_keeps_the_grammar_state():
    async with guided_stub("--num-kv-blocks", "12", "--block-size", "4") as (stub, service):
        runs = await asyncio.gather(
            *[generate(stub, constrained(p, regex=r"[a-f]{24}", max_tokens=24)) for p in PROMPTS[:4]]
        )
        assert service.loaded.engine.scheduler.num_preemptions > 0
    for _, tokens in runs:
        assert re.fullmatch(r"[a-f]{24}", text(tokens[0]))


async def test_engine_core_process_compiles_in_the_core():
    async with guided_stub("--engine-core", "process") as (stub, _):
        _, tokens = await generate(stub, constrained(PROMPTS[0], regex=r"[0-9]{4}"))
        error = await refused(stub, constrained(PROMPTS[0], regex=r"[0-9"))
    assert re.fullmatch(r"[0-9]{4}", text(tokens[0]))
    assert error.reason == "INVALID_GRAMMAR"


async def test_one_compile_per_constraint_and_cache_hits():
    async with guided_stub() as (stub, service):
        await asyncio.gather(*[generate(stub, constrained(p, regex=r"[a-z]{3}")) for p in PROMPTS])
        stats = service.loaded.engine.grammars.stats
    assert stats.misses == 1 and stats.hits >= len(PROMPTS)


@pytest.mark.parametrize(
    "kind,reason,field",
    [
        ({"json_schema": "{not json"}, "INVALID_GRAMMAR", "sampling_params.structured_outputs.json_schema"),
        ({"json_schema": '{"type": "array", "uniqueItems": true, "minItems": 2}'}, "INVALID_GRAMMAR", None),
        ({"json_schema": '{"type": "string", "format": "relative-json-pointer"}'}, "INVALID_GRAMMAR", None),
        ({"json_schema": '{"type": "string", "pattern": "^a+$", "maxLength": 3}'}, "INVALID_GRAMMAR", None),
        ({"regex": "(unclosed"}, "INVALID_GRAMMAR", "sampling_params.structured_outputs.regex"),
        ({"grammar": 'root ::= "a" missing'}, "INVALID_GRAMMAR", None),
        ({"grammar": "start: /[a-z]+/"}, "INVALID_GRAMMAR", None),
        ({"choice": []}, "INVALID_GRAMMAR", "sampling_params.structured_outputs.choice"),
        ({"choice": ["a", ""]}, "INVALID_GRAMMAR", "sampling_params.structured_outputs.choice.values[1]"),
        ({"structural_tag": "[]"}, "INVALID_GRAMMAR", None),
        ({"regex": "a", "whitespace_pattern": " *"}, "UNSUPPORTED_FIELD", None),
        ({"regex": "a" * 5000}, "GRAMMAR_TOO_COMPLEX", None),
        ({"disable_any_whitespace": True}, "INVALID_GRAMMAR", None),
    ],
)
async def test_bad_constraints_are_refused_before_admission(kind, reason, field):
    async with guided_stub("--max-grammar-bytes", "4096") as (stub, service):
        message = request(PROMPTS[0], max_tokens=4)
        so = message.sampling_params.structured_outputs
        for name, value in kind.items():
            if name == "choice":
                so.choice.SetInParent()
                so.choice.values.extend(value)
            else:
                setattr(so, name, value)
        error = await refused(stub, message)
        assert service.loaded.engine.num_running == 0
    assert error.reason == reason, error
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    if field:
        assert error.violations[0][0] == field


async def test_a_grammar_past_the_compile_bound_is_refused_at_once_thereafter():
    # ~0.1-0.5 s to compile: far past a 1 ms bound
    schema = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "pattern": "^(a{1,20}b){1,20}$"} for i in range(8)},
    }
    async with guided_stub("--grammar-compile-timeout-s", "0.001") as (stub, service):
        message = constrained(PROMPTS[0], json_schema=json.dumps(schema))
        first = await refused(stub, message)
        while service.loaded.engine.grammars._running:  # the compile finishes in the background
            await asyncio.sleep(0.05)
        second = await refused(stub, message)
        _, tokens = await generate(stub, request(PROMPTS[0], temperature=0, max_tokens=5))  # the engine still serves
    assert first.reason == second.reason == "GRAMMAR_TOO_COMPLEX"
    assert "did not compile within" in second.message
    assert len(tokens[0]) == 5


async def test_an_engine_without_a_tokenizer_refuses_constraints():
    async with guided_stub(build=build_plain) as (stub, _):
        error = await refused(stub, constrained(PROMPTS[0], regex="a"))
    assert error.reason == "STRUCTURED_OUTPUTS_UNAVAILABLE"
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION


def test_disallowed_tokens_are_never_drawn_whatever_the_noise():
    """A masked (-inf) logit stays out even where the counter-based noise is at its largest (+inf before the
    cap: -inf + inf was NaN, which won the argmax once in a few thousand rows of a large vocabulary)."""
    vocab = 49152
    sampler = Sampler(vocab, torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    for trial in range(3000):
        seqs = [Sequence("r", 0, [1], SamplingConfig(temperature=0.8, top_p=0.9 if trial % 2 else 1.0, seed=trial))]
        allowed = torch.randint(0, vocab, (5,), generator=generator)
        logits = torch.full((1, vocab), float("-inf"))
        logits[0, allowed] = torch.randn(5, generator=generator)
        [token], _ = sampler.sample(logits, seqs)
        assert token in allowed.tolist()
