"""SGLang's `/generate` body onto typed completion requests (pipeline_svc/faces/sglang_request.py): SGLang's
batch rules, its sampling_params names, and every field refused unless at its default."""

from __future__ import annotations

import json

import pytest

from pipeline_svc.faces import sglang_request
from scaleout_common.errors import ServiceError


def _parse(body: dict) -> sglang_request.GenerateBody:
    return sglang_request.parse(json.dumps(body).encode())


def _refused(body: dict) -> ServiceError:
    with pytest.raises(ServiceError) as refused:
        _parse(body)
    return refused.value


def test_one_prompt_maps_sglangs_sampling_names():
    sampling = {
        "max_new_tokens": 5,
        "min_new_tokens": 1,
        "temperature": 0,
        "top_k": -1,
        "stop": "x",
        "sampling_seed": 3,
        "logit_bias": {"2": 1.5},
        "no_stop_trim": True,
        "structural_tag": "{}",
    }
    body = _parse({"text": "hi", "sampling_params": sampling, "rid": "r", "return_logprob": True})
    assert body.single and not body.stream and len(body.prompts) == 1
    prompt = body.prompts[0]
    typed = prompt.typed
    assert list(typed.prompts) == ["hi"] and typed.request_id == "r" and prompt.rids == ["r"]
    assert (typed.max_tokens, typed.min_tokens, typed.temperature, typed.top_k, typed.seed) == (5, 1, 0, 0, 3)
    assert list(typed.stop) == ["x"] and dict(typed.logit_bias) == {2: 1.5} and typed.no_stop_trim
    assert typed.structured_outputs.structural_tag == "{}" and typed.return_token_ids
    assert typed.logprobs == 0 and not typed.HasField("prompt_logprobs") and prompt.logprob_start_len == -1


def test_smgs_unnamed_model_names_none_and_a_name_goes_to_render():
    assert _parse({"text": "hi", "model": "unknown"}).prompts[0].typed.model == ""
    assert _parse({"text": "hi", "model": "smol"}).prompts[0].typed.model == "smol"


def test_max_new_tokens_defaults_to_128_and_null_is_the_context():
    assert _parse({"text": "hi"}).prompts[0].typed.max_tokens == 128
    assert (
        not _parse({"text": "hi", "sampling_params": {"max_new_tokens": None}}).prompts[0].typed.HasField("max_tokens")
    )


def test_max_new_tokens_0_is_prefill_only():
    prompt = _parse({"text": "hi", "sampling_params": {"max_new_tokens": 0}}).prompts[0]
    assert prompt.prefill_only and prompt.typed.max_tokens == 1  # the engine's one token, which the answer drops
    assert not _parse({"text": "hi"}).prompts[0].prefill_only
    both = _refused({"text": "hi", "sampling_params": [{"max_new_tokens": 0, "min_new_tokens": 2}]})
    assert both.violations[0][0] == "sampling_params[0].min_new_tokens"


def test_batches_and_n_expand_as_sglang():
    batch = _parse({"input_ids": [[1, 2], [3]], "rid": "b", "sampling_params": [{"n": 2}, {"n": 2}]})
    assert not batch.single and [p.rids for p in batch.prompts] == [["b_0_0", "b_0_1"], ["b_1_0", "b_1_1"]]
    assert [list(p.typed.prompt_token_ids[0].token_ids) for p in batch.prompts] == [[1, 2], [3]]
    assert batch.prompts[0].typed.n == 2
    assert not _parse({"text": "hi", "sampling_params": {"n": 3}}).single  # n > 1 answers a list
    per_prompt = _parse({"text": ["a", "b"], "top_logprobs_num": [1, 2], "return_logprob": True})
    assert [p.top_logprobs_num for p in per_prompt.prompts] == [1, 2]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "a", "input_ids": [1]}, "input_ids"),
        ({"text": []}, "text"),
        ({"input_ids": []}, "input_ids"),
        ({}, "text"),
        ({"text": ["a", "b"], "sampling_params": [{}]}, "sampling_params"),
        ({"text": ["a", "b"], "sampling_params": [{"n": 1}, {"n": 2}]}, "sampling_params"),
        ({"text": ["a"], "return_logprob": [True], "sampling_params": {"n": 2}}, "return_logprob"),
        ({"text": ["a", "b"], "rid": ["x"]}, "rid"),
        ({"text": "a", "sampling_params": {"beam_width": 4}}, "sampling_params.beam_width"),
        ({"text": "a", "sampling_params": {"top_k": 1.5}}, "sampling_params.top_k"),
        ({"text": "a", "sampling_params": {"bogus": 1}}, "sampling_params.bogus"),
        ({"text": "a", "routed_dp_rank": 1}, "routed_dp_rank"),
        ({"text": "a", "log_metrics": False}, "log_metrics"),
        ({"text": "a", "sampling_params": {"n": 10**9}}, "text"),
        ({"text": "a", "sampling_params": {"logit_bias": {"9" * 30: 1}}}, "sampling_params.logit_bias"),
        ({"input_ids": [[1]] * 100, "sampling_params": {"n": 2}}, "input_ids"),
    ],
)
def test_bad_bodies_are_refused_naming_the_field(body, field):
    assert _refused(body).violations[0][0] == field


def test_every_default_only_field_is_refused_off_its_default_and_taken_at_it():
    for name, (values, _) in sglang_request.DEFAULT_ONLY.items():
        assert _parse({"text": "a", name: values[0]}).single
        refused = _refused({"text": "a", name: "something"})
        assert refused.reason == "UNSUPPORTED_FIELD" and refused.violations[0][0] == name
