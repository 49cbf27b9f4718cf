"""Sampling resolution rules: absent vs explicit zero, generation_config defaults, max_tokens from the context."""

from __future__ import annotations

import pytest

from scaleout.v1 import render_pb2
from scaleout_common import sampling_rules as sampling
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason as reasons

PLAIN = sampling.ModelLimits(max_model_len=100, vocab_size=1000)
TUNED = sampling.ModelLimits(
    max_model_len=100,
    vocab_size=1000,
    defaults={
        "temperature": 0.6,
        "top_p": 0.9,
        "top_k": 20,
        "min_p": 0.05,
        "repetition_penalty": 1.1,
        "max_tokens": 30,
    },
)


def chat(**fields) -> render_pb2.RenderChatRequest:
    return render_pb2.RenderChatRequest(**fields)


def resolve(request, limits=PLAIN, prompt_len=10, chat_request=True):
    return sampling.resolve(request, prompt_len, limits, chat_request, prompt_field="messages")


def test_absent_fields_get_neutral_values_without_generation_config():
    params = resolve(chat())
    assert (params.temperature, params.top_p, params.top_k, params.min_p) == (1.0, 1.0, 0, 0.0)
    assert (params.repetition_penalty, params.presence_penalty, params.frequency_penalty) == (1.0, 0.0, 0.0)
    assert params.max_tokens == 90
    for name in ("seed", "logprobs", "prompt_logprobs"):
        assert not params.HasField(name)


def test_absent_fields_take_generation_config_defaults():
    params = resolve(chat(), TUNED)
    assert params.temperature == pytest.approx(0.6) and params.top_p == pytest.approx(0.9)
    assert (
        params.top_k == 20 and params.min_p == pytest.approx(0.05) and params.repetition_penalty == pytest.approx(1.1)
    )
    assert params.max_tokens == 30  # max_new_tokens caps the default


def test_explicit_zero_is_kept_not_replaced_by_defaults():
    params = resolve(chat(temperature=0.0, top_k=0, min_p=0.0, min_tokens=0), TUNED)
    assert params.HasField("temperature") and params.temperature == 0.0
    assert params.top_k == 0 and params.min_p == 0.0


def test_explicit_values_win_over_generation_config():
    params = resolve(chat(temperature=0.2, top_p=0.5, max_tokens=50), TUNED)
    assert params.temperature == pytest.approx(0.2) and params.top_p == pytest.approx(0.5)
    assert params.max_tokens == 50  # generation_config's max_new_tokens caps only the default


def test_top_k_minus_one_means_off():
    assert resolve(chat(top_k=-1)).top_k == 0


def test_max_completion_tokens_wins_over_max_tokens():
    assert resolve(chat(max_tokens=5, max_completion_tokens=7)).max_tokens == 7


def test_max_tokens_default_is_what_the_context_leaves():
    assert resolve(chat(), prompt_len=97).max_tokens == 3


def test_max_tokens_that_does_not_fit_is_out_of_range():
    with pytest.raises(ServiceError) as caught:
        resolve(chat(max_tokens=91))
    assert caught.value.reason == reasons.MAX_TOKENS_TOO_LARGE and caught.value.code.name == "OUT_OF_RANGE"
    assert resolve(chat(max_tokens=90)).max_tokens == 90


def test_prompt_that_leaves_no_room_is_out_of_range():
    with pytest.raises(ServiceError) as caught:
        resolve(chat(), prompt_len=100)
    assert caught.value.reason == reasons.PROMPT_TOO_LONG and caught.value.code.name == "OUT_OF_RANGE"


def test_chat_logprobs_follow_top_logprobs():
    assert not resolve(chat()).HasField("logprobs")
    assert resolve(chat(logprobs=True)).logprobs == 0
    assert resolve(chat(logprobs=True, top_logprobs=5)).logprobs == 5


def test_minus_one_logprobs_is_the_whole_vocabulary_where_max_logprobs_allows_it():
    """vLLM's -1 (its test_chat_echo runs with --max-logprobs at the vocabulary size); refused below it."""
    whole = sampling.ModelLimits(max_model_len=100, vocab_size=1000, max_logprobs=1000)
    assert resolve(chat(logprobs=True, top_logprobs=-1), whole).logprobs == 1000
    completion = render_pb2.RenderCompletionRequest(logprobs=-1, prompt_logprobs=-1)
    params = resolve(completion, whole, chat_request=False)
    assert (params.logprobs, params.prompt_logprobs) == (1000, 1000)
    with pytest.raises(ServiceError) as refused:
        resolve(chat(logprobs=True, top_logprobs=-1))  # max_logprobs 20 < 1000
    assert refused.value.reason == reasons.INVALID_SAMPLING_PARAM and refused.value.violations[0][0] == "top_logprobs"


def test_completion_logprobs_is_a_count():
    request = render_pb2.RenderCompletionRequest(logprobs=3, prompt_logprobs=2, seed=7)
    params = resolve(request, chat_request=False)
    assert (params.logprobs, params.prompt_logprobs, params.seed) == (3, 2, 7)


def test_passthrough_fields():
    params = resolve(
        chat(seed=0, stop_token_ids=[5, 6], allowed_token_ids=[1], logit_bias={3: 500.0, 4: -1.5}, ignore_eos=True)
    )
    assert params.HasField("seed") and params.seed == 0
    assert list(params.stop_token_ids) == [5, 6] and list(params.allowed_token_ids) == [1] and params.ignore_eos
    assert dict(params.logit_bias) == {3: 100.0, 4: -1.5}  # clamped to [-100, 100] as OpenAI/vLLM do


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -2}, "top_k"),
        ({"min_p": 1.5}, "min_p"),
        ({"repetition_penalty": 0.0}, "repetition_penalty"),
        ({"presence_penalty": 2.5}, "presence_penalty"),
        ({"frequency_penalty": -3.0}, "frequency_penalty"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": -5}, "max_tokens"),
        ({"max_completion_tokens": 0}, "max_completion_tokens"),
        ({"n": 0}, "n"),
        ({"min_tokens": -1}, "min_tokens"),
        ({"top_logprobs": 3}, "top_logprobs"),  # without logprobs=true
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"prompt_logprobs": 99}, "prompt_logprobs"),
        ({"stop": ["ok", ""]}, "stop[1]"),
        ({"stream_interval": 0}, "stream_interval"),
    ],
)
def test_invalid_values_are_invalid_sampling_param(fields, field):
    with pytest.raises(ServiceError) as caught:
        resolve(chat(**fields))
    assert caught.value.reason == reasons.INVALID_SAMPLING_PARAM
    assert caught.value.code.name == "INVALID_ARGUMENT"
    assert caught.value.violations[0][0] == field


@pytest.mark.parametrize("stop", [["s"] * 17, ["x" * 257]])
def test_stop_strings_within_derenders_bounds(stop):
    """Refused here, naming the caller's field, not later by derender naming its context's."""
    with pytest.raises(ServiceError) as caught:
        resolve(chat(stop=stop))
    assert (caught.value.reason, caught.value.violations[0][0]) == ("TOO_MANY_STOP_STRINGS", "stop")
    resolve(chat(stop=["s"] * 16, max_tokens=4))  # at the bound: served


def test_min_tokens_above_max_tokens_is_invalid():
    with pytest.raises(ServiceError) as caught:
        resolve(chat(min_tokens=20, max_tokens=10))
    assert caught.value.reason == reasons.INVALID_SAMPLING_PARAM


@pytest.mark.parametrize(
    "fields", [{"stop_token_ids": [1000]}, {"allowed_token_ids": [-1]}, {"logit_bias": {5000: 1.0}}]
)
def test_token_ids_outside_the_vocabulary(fields):
    with pytest.raises(ServiceError) as caught:
        resolve(chat(**fields))
    assert caught.value.reason == reasons.TOKEN_ID_OUT_OF_VOCAB
