"""What vLLM's own OpenAI-server tests (bench/peers, `--suite vllm-openai`) found different here, fixed, through the
official `openai` SDK against the real stack.

- usage always has `prompt_tokens_details.cached_tokens` (OpenAI prints it; vLLM with --enable-prompt-tokens-details);
- `logit_bias` keys that are no token ids are all named in one 400 (vLLM's test_chat_logit_bias_validation);
- a message key the template is not given is refused naming its path, never dropped (vLLM hands it to the template);
- vLLM's `--enable-force-include-usage` (the one-hop service's flag): usage on every streamed chunk, and a last
  usage chunk, without `stream_options`;
- vLLM's `--return-tokens-as-token-ids` (the same service's): the field's default, a request's own value wins;
- vLLM's `--enable-per-request-metrics` (the same service's): `metrics` (TTFT, queue, generation time, mean ITL,
  tokens/s) from the engine's timings, unary and on a stream's usage chunk, and on a finished Response (unary,
  streamed, stored, background); no key without the flag; with the engine's `--per-request-spec-decode-metrics`
  (n-gram speculation) its `speculative_decoding`, also on /inference/v1/generate (Responses: null, as vLLM);
- `responses.cancel` answers (400 for a response answered in its call; 404 for an unknown id);
- the Responses API takes vLLM's `chat_template_kwargs` (and `reasoning.effort` sets `enable_thinking`), and
  echoes `temperature` / `top_p` as sent, not as their float32 (0.699999988079071);
- vLLM's decode-side token reuse: a chat's `kv_transfer_params.prompt_token_ids` (a P/D router forwards the prefill
  step's) is the prompt, in place of the rendered messages, unary and streamed; bad ids are a 400 naming them.
"""

from __future__ import annotations

import json
import time

import openai
import pytest
import requests
from openai.types.chat import ChatCompletionMessageParam

from devstack.stack import Stack, StackConfig
from tests.sdks import openai_sdk

pytestmark = pytest.mark.slow

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is the capital of France?"}]
NGRAM = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}'


def test_usage_always_details_the_cached_prompt_tokens(client, model_id):
    chat = client.chat.completions.create(model=model_id, messages=USER, max_tokens=2, temperature=0)
    text = client.completions.create(model=model_id, prompt="The capital of France is", max_tokens=2)
    stream = client.chat.completions.create(
        model=model_id, messages=USER, max_tokens=2, stream=True, stream_options={"include_usage": True}
    )
    last = list(stream)[-1]
    for usage in (chat.usage, text.usage, last.usage):
        assert usage is not None and usage.prompt_tokens_details is not None
        assert 0 <= usage.prompt_tokens_details.cached_tokens <= usage.prompt_tokens
    assert not any("metrics" in (answer.model_extra or {}) for answer in (chat, text, last))  # no flag, no key


def test_logit_bias_keys_that_are_no_token_ids_are_all_named(client, model_id):
    for route in (client.chat.completions.create, client.completions.create):
        body = {"messages": USER} if route == client.chat.completions.create else {"prompt": "Hi"}
        with pytest.raises(openai.BadRequestError) as refused:
            route(model=model_id, max_tokens=2, logit_bias={"bad1": 50, "7": 1, "bad2": 20}, **body)
        error = refused.value.body
        assert isinstance(error, dict) and error["param"] == "logit_bias" and error["code"] == "INVALID_REQUEST"
        assert "'bad1'" in error["message"] and "'bad2'" in error["message"] and "'7'" not in error["message"]


def test_a_message_key_the_template_does_not_get_is_refused_naming_it(client, model_id):
    messages = [{"role": "user", "content": "what is 1+1?", "extra_field": "0"}]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=model_id, messages=messages, max_tokens=2)  # type: ignore[arg-type]
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "UNSUPPORTED_FIELD"
    assert error["param"] == "messages[0].extra_field"


@pytest.fixture(scope="module")
def forced(tmp_path_factory):
    """A stack whose one-hop service runs with vLLM's server flags, its engine with n-gram speculation counted per
    request (greedy outputs are the same)."""
    config = StackConfig(
        port=0,
        log_dir=tmp_path_factory.mktemp("vllm-flags-logs"),
        service_args={
            "chat": ["--enable-force-include-usage", "--return-tokens-as-token-ids", "--enable-per-request-metrics"],
            "engine": ["--speculative-config", NGRAM, "--per-request-spec-decode-metrics", "summary"],
        },
    )
    with Stack(config) as running:
        yield running


def test_force_include_usage_puts_usage_on_every_chunk(forced):
    with openai_sdk(forced.rest_url) as sdk:
        model = sdk.models.list().data[0].id
        for chunks in (
            list(sdk.chat.completions.create(model=model, messages=USER, max_tokens=4, stream=True)),
            list(sdk.completions.create(model=model, prompt="The capital of France is", max_tokens=4, stream=True)),
        ):
            assert all(chunk.usage is not None for chunk in chunks)
            assert chunks[-1].choices == [] and chunks[-1].usage is not None
            completions = [chunk.usage.completion_tokens for chunk in chunks if chunk.usage is not None]
            assert completions == sorted(completions) and completions[-1] >= 1
        unary = sdk.chat.completions.create(model=model, messages=USER, max_tokens=2)
        assert unary.usage is not None  # unary answers are unchanged


def test_return_tokens_as_token_ids_is_the_default_a_request_overrides(forced):
    with openai_sdk(forced.rest_url) as sdk:
        model = sdk.models.list().data[0].id
        ask = {"model": model, "messages": USER, "max_tokens": 3, "temperature": 0, "logprobs": True}
        as_ids = sdk.chat.completions.create(**ask).choices[0].logprobs
        as_text = sdk.chat.completions.create(**ask, extra_body={"return_tokens_as_token_ids": False}).choices[0]
        text = sdk.completions.create(model=model, prompt="The capital of France is", max_tokens=3, logprobs=1)
        assert as_ids is not None and as_ids.content and as_text.logprobs and as_text.logprobs.content
        assert all(t.token.startswith("token_id:") for t in as_ids.content)
        assert not any(t.token.startswith("token_id:") for t in as_text.logprobs.content)
        logprobs = text.choices[0].logprobs
        assert logprobs is not None and logprobs.tokens and all(t.startswith("token_id:") for t in logprobs.tokens)


def _speculated(spec) -> None:
    """The engine's per-request speculation counts, in vLLM's SpeculativeDecodingMetrics (summary: no per-step)."""
    assert spec is not None and spec.num_spec_tokens == 3 and len(spec.acceptance_histogram) == 4
    assert spec.num_spec_steps == sum(spec.acceptance_histogram) and spec.per_step_accepted is None
    assert spec.num_accepted_draft_tokens <= spec.num_draft_tokens <= 3 * spec.num_spec_steps


def _engine_measured(metrics, completion_tokens: int, wall_ms: float, speculated: bool = True):
    """vLLM's own model parses it, and the figures are one generation's as the engine timed it."""
    protocol = pytest.importorskip("vllm.entrypoints.generate.base.protocol")
    parsed = protocol.PerRequestMetrics.model_validate(metrics)
    if speculated:
        _speculated(parsed.speculative_decoding)
    else:
        assert parsed.speculative_decoding is None
    ttft, decode, queue = parsed.time_to_first_token_ms, parsed.generation_time_ms, parsed.queue_time_ms
    assert ttft is not None and decode is not None and queue is not None and parsed.tokens_per_second is not None
    assert ttft > 0 and decode >= 0 and queue >= 0 and queue + ttft + decode <= wall_ms
    assert parsed.tokens_per_second == pytest.approx(completion_tokens / (ttft + decode) * 1000)
    if completion_tokens > 1:
        assert decode > 0 and parsed.mean_itl_ms == pytest.approx(decode / (completion_tokens - 1))
    else:
        assert parsed.mean_itl_ms is None
    return parsed


def test_per_request_metrics_are_the_engines_timings_in_vllms_object(forced):
    """vLLM's test_chat_completion `test_per_request_metrics_*`, and completions, a stream and `n`, as vLLM 0.33."""
    with openai_sdk(forced.rest_url) as sdk:
        model = sdk.models.list().data[0].id
        ask = {"model": model, "max_tokens": 4, "temperature": 0, "extra_body": {"min_tokens": 4}}
        start = time.perf_counter()
        chat = sdk.chat.completions.create(messages=USER, **ask)
        wall_ms = (time.perf_counter() - start) * 1000
        assert chat.usage is not None and chat.usage.completion_tokens == 4
        _engine_measured((chat.model_extra or {})["metrics"], 4, wall_ms)

        start = time.perf_counter()
        text = sdk.completions.create(prompt="The capital of France is", **ask)
        _engine_measured((text.model_extra or {})["metrics"], 4, (time.perf_counter() - start) * 1000)
        two = sdk.completions.create(prompt="The capital of France is", n=2, **ask)
        assert (two.model_extra or {})["metrics"] is None  # two sequences: not one generation's (vLLM: null)

        start = time.perf_counter()
        chunks = list(sdk.chat.completions.create(model=model, messages=USER, max_tokens=1, stream=True))
        wall_ms = (time.perf_counter() - start) * 1000
        assert all("metrics" not in (chunk.model_extra or {}) for chunk in chunks[:-1])
        metrics = (chunks[-1].model_extra or {})["metrics"]
        assert chunks[-1].choices == [] and "mean_itl_ms" not in metrics  # one token: null, left out as vLLM
        _engine_measured(metrics, 1, wall_ms)

    # vLLM's /inference/v1/generate carries only speculation counts there (n 1), never the timings
    protocol = pytest.importorskip("vllm.entrypoints.generate.base.protocol")
    ask = {"model": model, "token_ids": [1, 2, 3, 2, 3, 2, 3], "sampling_params": {"max_tokens": 6, "temperature": 0}}
    url = forced.rest_url + "/inference/v1/generate"
    generated = requests.post(url, json=ask, timeout=120).json()
    parsed = protocol.PerRequestMetrics.model_validate(generated["metrics"])
    assert generated["choices"][0]["token_ids"] and parsed.time_to_first_token_ms is None
    _speculated(parsed.speculative_decoding)
    two = {**ask, "sampling_params": {**ask["sampling_params"], "n": 2}}
    assert requests.post(url, json=two, timeout=120).json()["metrics"] is None
    lines = requests.post(url, json={**ask, "stream": True, "stream_options": {"include_usage": True}}, timeout=120)
    last = json.loads([line for line in lines.text.splitlines() if line.startswith("data: {")][-1][6:])
    assert last["choices"] == [] and list(last["metrics"]) == ["speculative_decoding"]


def test_a_finished_response_has_the_per_request_metrics_as_vllms_responses(forced):
    """vLLM 0.33's Responses with the flag: the finished Response (unary, `response.completed`, the stored one, a
    background one) has `metrics` (nulls printed; speculative_decoding null there); the snapshots before none."""
    protocol = pytest.importorskip("vllm.entrypoints.openai.responses.protocol")
    with openai_sdk(forced.rest_url) as sdk:
        model = sdk.models.list().data[0].id
        ask = {"model": model, "input": "Hello!", "max_output_tokens": 3, "temperature": 0}
        start = time.perf_counter()
        raw = sdk.responses.with_raw_response.create(**ask).http_response.json()
        wall_ms = (time.perf_counter() - start) * 1000
        unary = protocol.ResponsesResponse.model_validate(raw)
        assert unary.metrics is not None and set(raw["metrics"]) == set(protocol.PerRequestMetrics.model_fields)
        _engine_measured(raw["metrics"], raw["usage"]["output_tokens"], wall_ms, speculated=False)
        assert (sdk.responses.retrieve(unary.id).model_extra or {})["metrics"] == raw["metrics"]  # as stored

        start = time.perf_counter()
        streamed = [
            e.model_dump(mode="json") for e in sdk.responses.create(**{**ask, "max_output_tokens": 1}, stream=True)
        ]
        wall_ms = (time.perf_counter() - start) * 1000
        assert [e["type"] for e in streamed[:2]] == ["response.created", "response.in_progress"]
        assert all("metrics" not in e["response"] for e in streamed[:2])
        last = streamed[-1]  # one token: `response.incomplete` (max_output_tokens)
        kind = (
            protocol.ResponseIncompleteEvent
            if last["type"] == "response.incomplete"
            else protocol.ResponseCompletedEvent
        )
        metrics = kind.model_validate(last).response.metrics
        assert metrics is not None and metrics.mean_itl_ms is None
        _engine_measured(metrics.model_dump(), 1, wall_ms, speculated=False)

        queued = sdk.responses.create(**ask, background=True)
        assert "metrics" not in (queued.model_extra or {})
        for _ in range(600):
            finished = sdk.responses.retrieve(queued.id)
            if finished.status not in ("queued", "in_progress"):
                break
            time.sleep(0.05)
        assert protocol.ResponsesResponse.model_validate(finished.model_dump(mode="json")).metrics is not None


def test_a_stored_response_is_not_cancellable_and_an_unknown_one_not_found(client, model_id):
    """The SDK's `responses.cancel` (vLLM's test_stateful test_cancel_completed): was a gateway 404 (no route)."""
    stored = client.responses.create(model=model_id, input="Hello!", max_output_tokens=2)
    with pytest.raises(openai.BadRequestError, match=r"Cannot cancel a synchronous response\.") as refused:
        client.responses.cancel(stored.id)
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "RESPONSE_NOT_CANCELLABLE" and error["param"] == "response_id"
    assert client.responses.retrieve(stored.id).status == stored.status  # untouched
    with pytest.raises(openai.NotFoundError, match="not found"):
        client.responses.cancel("resp_" + "0" * 32)


def test_responses_take_chat_template_kwargs_and_temperature_echoes_as_sent(client, model_id):
    """vLLM's Responses extension `chat_template_kwargs` (test_function_call's enable_thinking) reaches the template
    as chat's does (a reserved name is refused there); the echoed float32 sampling knobs print as sent."""
    kwargs = {"model": model_id, "input": "Hello!", "max_output_tokens": 2, "temperature": 0.7, "top_p": 0.9}
    answer = client.responses.create(**kwargs, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert answer.output and (answer.temperature, answer.top_p) == (0.7, 0.9)
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(**kwargs, extra_body={"chat_template_kwargs": {"messages": []}})
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "RESERVED_TEMPLATE_KWARG"
    assert error["param"] == "chat_template_kwargs"


def test_forwarded_prompt_token_ids_are_the_prompt_in_place_of_the_messages(client, model_id):
    """vLLM's test_chat_completion kv_transfer cases: the decode request's own messages are not rendered."""
    baseline = client.chat.completions.create(
        model=model_id, messages=USER, max_tokens=8, temperature=0, extra_body={"return_token_ids": True}
    )
    reused = baseline.model_extra["prompt_token_ids"]
    other = [{"role": "user", "content": "unrelated decode-side text"}]
    reuse = {"kv_transfer_params": {"prompt_token_ids": reused}, "return_token_ids": True}
    decode = client.chat.completions.create(
        model=model_id, messages=other, max_tokens=8, temperature=0, extra_body=reuse
    )
    assert decode.model_extra["prompt_token_ids"] == reused
    assert decode.choices[0].message.content == baseline.choices[0].message.content
    assert decode.usage is not None and decode.usage.prompt_tokens == len(reused)
    stream = client.chat.completions.create(
        model=model_id, messages=other, max_tokens=8, temperature=0, stream=True, extra_body=reuse
    )
    chunks = list(stream)
    assert chunks[0].model_extra["prompt_token_ids"] == reused
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == decode.choices[0].message.content
    for bad, field in (
        ([], "kv_transfer_params.prompt_token_ids"),
        ([1, 10**6], "kv_transfer_params.prompt_token_ids[1]"),
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model=model_id,
                messages=other,
                max_tokens=2,
                extra_body={"kv_transfer_params": {"prompt_token_ids": bad}},
            )
        assert isinstance(refused.value.body, dict) and refused.value.body["param"] == field
    with pytest.raises(openai.BadRequestError) as refused:  # completions do not read them (as vLLM): named
        client.completions.create(
            model=model_id, prompt="Hi", max_tokens=2, extra_body={"kv_transfer_params": {"prompt_token_ids": [1]}}
        )
    assert isinstance(refused.value.body, dict) and refused.value.body["param"] == "kv_transfer_params.prompt_token_ids"
