"""vLLM 0.33's `/inference/v1/generate` face without a stack: the request table (vllm_generate_request.py) field by
field and under random mutation (only typed refusals, never another exception), and the answers
(vllm_generate_output.py) built from engine messages and parsed by vLLM's own pydantic classes from the installed
wheel; `/server_info`'s speculative_config from the engine's model info. The live route: tests/gateway/
test_vllm_generate.py."""

from __future__ import annotations

import contextlib
import json
import random
from dataclasses import replace

import pytest

from engine_svc.scheduling.admission import EngineLimits, admit
from engine_svc.serving.service import _speculative
from pipeline_svc.faces import vllm_server_info
from pipeline_svc.faces.vllm_derender import engine_result
from pipeline_svc.faces.vllm_generate_output import GenerateAnswer
from pipeline_svc.faces.vllm_generate_request import SAMPLING, STRUCTURED, STRUCTURED_FLAGS, TOP, parse
from scaleout.v1 import common_pb2, engine_pb2, render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason

protocol = pytest.importorskip(
    "vllm.entrypoints.scale_out.token_in_token_out.protocol", reason="vLLM 0.33's wheel (make setup installs it)"
)
pydantic = pytest.importorskip("pydantic")

UNARY = pydantic.TypeAdapter(protocol.GenerateResponse)
CHUNK = pydantic.TypeAdapter(protocol.GenerateStreamResponse)
BODY = {
    "request_id": "r",
    "token_ids": [5, 6, 7],
    "sampling_params": {"temperature": 0.5, "top_k": -1, "seed": 3, "max_tokens": 4, "n": 2, "logprobs": 1},
}


def test_the_tables_cover_vllms_fields():
    assert set(TOP) == set(protocol.GenerateRequest.model_fields) | {"scaleout"}
    vllm = {name for name in protocol.SamplingParams.__struct_fields__ if not name.startswith("_")}
    assert set(SAMPLING) == vllm


def test_fields_map_onto_our_request():
    generate = parse(BODY | {"stream": True, "stream_options": {"include_usage": True}, "cache_salt": "s"})
    typed = generate.typed
    assert (
        typed.request_id == "generate-tokens-r"
        and list(typed.token_ids) == [5, 6, 7]
        and typed.n == 2
        and typed.cache_salt == "s"
    )
    sampling = typed.sampling_params
    assert sampling.temperature == 0.5 and sampling.top_k == 0 and sampling.seed == 3 and sampling.logprobs == 1
    assert generate.stream and generate.include_usage and not generate.continuous_usage
    constrained = parse(
        {"token_ids": [1], "sampling_params": {"structured_outputs": {"choice": ["a", "b"]}}, "reasoning_ended": True}
    )
    assert constrained.asks == {"structured_outputs": {"choice": ["a", "b"]}} and constrained.reasoning_ended
    rendered = engine_pb2.GenerateRequest(tokenizer_fingerprint="f")
    rendered.sampling_params.bad_words.add(token_ids=[9])
    block = {"generate_request": {"tokenizer_fingerprint": "f", "sampling_params": {"bad_words": [{"token_ids": [9]}]}}}
    typed = parse({"token_ids": [1], "sampling_params": {"bad_words": ["x"]}, "scaleout": block}).typed
    assert typed.tokenizer_fingerprint == "f" and list(typed.sampling_params.bad_words[0].token_ids) == [9]


def test_minus_one_is_the_whole_vocabulary_where_max_logprobs_allows_it():
    """vLLM's SamplingParams: -1 is the vocabulary size, then bounded by max_logprobs; the face passes it on and the
    engine resolves it (admission.py), with the completions route's rule (sampling_rules.whole_vocabulary)."""
    body = {"token_ids": [1, 2, 3], "sampling_params": {"prompt_logprobs": -1, "logprobs": -1, "max_tokens": 1}}
    whole = EngineLimits(
        vocab_size=1000, max_model_len=100, eos_token_ids=[], tokenizer_fingerprint="", max_logprobs=1000
    )
    typed = parse(body).typed
    _, seqs, _ = admit(typed, whole)
    assert (typed.sampling_params.prompt_logprobs, typed.sampling_params.logprobs) == (1000, 1000)
    assert seqs[0].config.prompt_logprobs == 1000 and seqs[0].config.logprobs == 1000
    for name in ("prompt_logprobs", "logprobs"):  # vLLM's default max_logprobs (20) is below the vocabulary
        with pytest.raises(ServiceError) as refused:
            admit(parse({"token_ids": [1, 2], "sampling_params": {name: -1}}).typed, replace(whole, max_logprobs=20))
        assert refused.value.reason == Reason.INVALID_SAMPLING_PARAM
        assert refused.value.violations[0][0] == f"sampling_params.{name}"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"features": {"mm_hashes": {}}}, "features"),
        ({"sampling_params": {"bogus": 1}}, "sampling_params.bogus"),
        ({"sampling_params": {"bad_words": [1]}}, "sampling_params.bad_words"),
        (
            {"sampling_params": {"structured_outputs": {"regex": "a", "choice": ["b"]}}},
            "sampling_params.structured_outputs",
        ),
        ({"sampling_params": {"thinking_token_budget": 5}}, "sampling_params.thinking_token_budget"),
        ({"sampling_params": {"seed": 2**64}}, "sampling_params.seed"),
        ({"stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
        ({"token_ids": [-1]}, "token_ids"),
    ],
)
def test_refusals_name_the_field(body, field):
    with pytest.raises(ServiceError) as refused:
        parse({"token_ids": [1], "sampling_params": {}} | body)
    assert refused.value.violations[0][0] == field


def test_random_bodies_are_refused_typed_or_parsed():
    rng = random.Random(5)
    values = [None, True, 0, -1, 2**31, 2**64, 1.5, 1e308, "", "x", [], [1, "a"], {}, {"a": 1}, [[1, 2]]]
    for _ in range(3000):
        body = {"token_ids": [1, 2], "sampling_params": dict(BODY["sampling_params"])}
        where = rng.choice([body, body["sampling_params"], {}])
        if not where:  # a structured-output constraint, taken as given
            body |= {"reasoning_ended": True, "scaleout": rng.choice([None, {"generate_request": rng.choice(values)}])}
            body["sampling_params"]["structured_outputs"] = where
        where[rng.choice([*TOP, *SAMPLING, *STRUCTURED, *STRUCTURED_FLAGS, "bogus"])] = rng.choice(values)
        with contextlib.suppress(ServiceError):
            parse(body)


def _message(choices, **fields) -> engine_pb2.GenerateResponse:
    return engine_pb2.GenerateResponse(request_id="r", choices=choices, weight_version="v1", **fields)


def _tokens(index, ids, finish=common_pb2.FINISH_REASON_UNSPECIFIED, **stop) -> engine_pb2.GenerateChoice:
    logprobs = common_pb2.TokenLogprobs(
        logprobs=[-0.5] * len(ids),
        ranks=[2] * len(ids),
        top=[common_pb2.TopLogprobs(token_ids=[99, t], logprobs=[-0.1, -0.5]) for t in ids],
    )
    return engine_pb2.GenerateChoice(index=index, token_ids=ids, logprobs=logprobs, finish_reason=finish, **stop)


MESSAGES = [
    _message([_tokens(0, [10]), _tokens(1, [20])], prompt=engine_pb2.PromptInfo(num_tokens=3, cached_tokens=1)),
    _message([_tokens(0, [11], common_pb2.FINISH_REASON_LENGTH)]),
    _message([_tokens(1, [21], common_pb2.FINISH_REASON_STOP, stop_str="\n")]),
    _message([], finished=True, usage=common_pb2.Usage(prompt_tokens=3, completion_tokens=4)),
]
MESSAGES[-1].kv_transfer_params.update({"do_remote_prefill": True, "remote_port": 5000, "remote_block_ids": [1, 2]})


def test_unary_answer_is_vllms():
    answer = GenerateAnswer(parse(BODY | {"return_token_ids": True}), "smol")
    for message in MESSAGES:
        answer.feed(message)
    parsed = UNARY.validate_python(answer.unary())
    assert isinstance(parsed, protocol.GenerateTokensResponse) and parsed.request_id == "generate-tokens-r"
    first, second = parsed.choices
    assert (first.finish_reason, first.stop_reason, first.token_ids) == ("length", None, [10, 11])
    assert (second.finish_reason, second.stop_reason, second.token_ids) == ("stop", "\n", [20, 21])
    top = first.logprobs.content[0].top_logprobs
    assert [(t.token_id, t.rank) for t in top] == [(10, 2), (99, 1)]  # the sampled token first
    assert parsed.usage.completion_tokens == 4 and parsed.usage.prompt_tokens_details.cached_tokens == 1
    assert parsed.prompt_token_ids == [5, 6, 7] and first.weight_versions[0].end == 2
    kv = answer.unary()["kv_transfer_params"]
    assert kv == {"do_remote_prefill": True, "remote_port": 5000, "remote_block_ids": [1, 2]}
    assert (
        json.dumps(kv, sort_keys=True) == '{"do_remote_prefill": true, "remote_block_ids": [1, 2], "remote_port": 5000}'
    )


def test_stream_chunks_are_vllms():
    answer = GenerateAnswer(parse(BODY | {"stream": True, "return_token_ids": True}), "smol")
    chunks = [CHUNK.validate_python(chunk) for message in MESSAGES for chunk in answer.feed(message)]
    assert [(c.choices[0].index, c.choices[0].token_ids) for c in chunks] == [
        (0, [10]),
        (1, [20]),
        (0, [11]),
        (1, [21]),
    ]
    assert chunks[0].prompt_token_ids == [5, 6, 7] and chunks[1].prompt_token_ids is None
    assert [c.choices[0].finish_reason for c in chunks] == [None, None, "length", "stop"]
    usage = CHUNK.validate_python(answer.usage_chunk())
    assert usage.choices == [] and usage.usage.total_tokens == 7


def test_server_info_reports_speculation():
    card = render_pb2.ModelCard(id="smol", root="/m", max_model_len=64)
    info = engine_pb2.GetModelInfoResponse(
        speculative_config=_speculative('{"method": "ngram", "num_speculative_tokens": 3}')
    )
    spec = vllm_server_info.server_info_body(card, info, 1, "json")["vllm_config"]["speculative_config"]
    assert spec == {
        "method": "ngram",
        "model": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_min": 5,
        "prompt_lookup_max": 5,
        "draft_sample_method": "greedy",
    }
    draft = _speculative('{"model": "/srv/models/draft-135m/", "num_speculative_tokens": 2}')
    assert draft is not None and (draft.method, draft.model, draft.prompt_lookup_min) == (
        "draft_model",
        "draft-135m",
        0,
    )
    plain = vllm_server_info.server_info_body(card, engine_pb2.GetModelInfoResponse(), 1, "json")
    assert plain["vllm_config"]["speculative_config"] is None


def test_derender_reads_the_generate_answer_back():
    answer = GenerateAnswer(parse(BODY), "smol")
    for message in MESSAGES:
        answer.feed(message)
    result = engine_result(answer.unary(), "generate_response")
    assert result.request_id == "generate-tokens-r" and result.finished
    first, second = result.choices
    assert list(first.token_ids) == [10, 11] and first.finish_reason == common_pb2.FINISH_REASON_LENGTH
    assert second.stop_str == "\n" and second.finish_reason == common_pb2.FINISH_REASON_STOP
    assert list(first.logprobs.ranks) == [2, 2] and list(first.logprobs.top[0].token_ids) == [99, 10]  # by logprob
    with pytest.raises(ServiceError) as refused:
        engine_result({"choices": [{"index": 0, "text": "x"}]}, "generate_response")
    assert refused.value.violations[0][0] == "generate_response.choices[0].text"


def test_random_generate_answers_are_refused_typed_or_read():
    rng = random.Random(7)
    values = [None, True, 0, -1, 2**31, 1.5, "", "x", [], [1, "a"], {}, {"content": [{"logprob": "x"}]}, [[1, 2]]]
    for _ in range(2000):
        answer = GenerateAnswer(parse(BODY), "smol")
        for message in MESSAGES:
            answer.feed(message)
        body = answer.unary()
        where = rng.choice([body, body["choices"][0], body["choices"][1]["logprobs"]["content"][0]])
        where[rng.choice([*where, "bogus"])] = rng.choice(values)
        with contextlib.suppress(ServiceError):
            engine_result(body, "generate_response")
