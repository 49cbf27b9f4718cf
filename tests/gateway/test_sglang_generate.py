"""SGLang's `POST /generate` through the real gateway and services on the default model, as SGLang's clients
(its test suite, SMG in HTTP mode, RL trainers such as slime) call it: text and input_ids, batches and n, the SSE
stream, logprobs in meta_info, SGLang's finish_reason shapes, and 400s naming the field for what is refused."""

from __future__ import annotations

import time

import pytest
import requests

from tests.gateway.rest import error_reason, post, sse_events

pytestmark = pytest.mark.slow

COUNT = "1, 2, 3,"  # the default model goes on " 4, 5, ..." greedily
COUNT_IDS = [33, 28, 216, 34, 28, 216, 35, 28]
GREEDY = {"temperature": 0, "max_new_tokens": 3}


def _generate(stack, body: dict):
    answer = post(stack, "/generate", body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_text_and_input_ids_answer_sglangs_object(stack):
    by_text = _generate(stack, {"text": COUNT, "sampling_params": GREEDY, "return_prompt_token_ids": True})
    assert set(by_text) == {"text", "output_ids", "meta_info", "prompt_token_ids"}
    assert by_text["prompt_token_ids"] == COUNT_IDS and by_text["text"] == " 4,"
    meta = by_text["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 3}
    assert meta["prompt_tokens"] == len(COUNT_IDS) and meta["completion_tokens"] == len(by_text["output_ids"]) == 3
    assert {"id", "cached_tokens", "e2e_latency", "weight_version"} <= set(meta) and "output_token_logprobs" not in meta
    by_ids = _generate(stack, {"input_ids": COUNT_IDS, "sampling_params": GREEDY, "rid": "mine"})
    assert by_ids["output_ids"] == by_text["output_ids"] and by_ids["text"] == by_text["text"]
    assert by_ids["meta_info"]["id"] == "mine"


def test_logprobs_are_sglangs_triples(stack):
    body = {
        "input_ids": COUNT_IDS,
        "sampling_params": GREEDY,
        "return_logprob": True,
        "top_logprobs_num": 2,
        "logprob_start_len": 0,
    }
    plain = _generate(stack, body)["meta_info"]
    assert plain["input_token_logprobs"][0] == [None, COUNT_IDS[0], None]
    assert [t[1] for t in plain["input_token_logprobs"]] == COUNT_IDS
    assert all(lp <= 0 and text is None for lp, _, text in plain["input_token_logprobs"][1:])
    assert plain["output_token_logprobs_length"] == len(plain["output_token_logprobs"]) == 3
    assert plain["input_top_logprobs"][0] is None and all(len(top) == 2 for top in plain["input_top_logprobs"][1:])
    # greedy: each output token is its position's most likely one
    assert [top[0][1] for top in plain["output_top_logprobs"]] == [t[1] for t in plain["output_token_logprobs"]]
    texts = _generate(stack, {**body, "return_text_in_logprobs": True, "logprob_start_len": -1})["meta_info"]
    assert texts["input_token_logprobs"] == [] and texts["input_top_logprobs"] == []
    assert [t[2] for t in texts["output_token_logprobs"]] == [" ", "4", ","]
    assert all(isinstance(alt[2], str) for top in texts["output_top_logprobs"] for alt in top)
    # SGLang's test_logprob_start_len: from position 2 on, the first of them with no logprob, the texts the prompt's
    started = _generate(
        stack, {**body, "text": COUNT, "input_ids": None, "logprob_start_len": 2, "return_text_in_logprobs": True}
    )
    inputs = started["meta_info"]["input_token_logprobs"]
    assert (
        len(inputs) == len(COUNT_IDS) - 2
        and inputs[0][0] is None
        and inputs[1][0] == plain["input_token_logprobs"][3][0]
    )
    assert (
        COUNT.endswith("".join(text for _, _, text in inputs)) and started["meta_info"]["input_top_logprobs"][0] is None
    )
    slime = _generate(stack, {"input_ids": COUNT_IDS, "sampling_params": GREEDY, "return_logprob": True})["meta_info"]
    assert len(slime["output_token_logprobs"]) == 3 and "output_top_logprobs" not in slime


def test_max_new_tokens_0_scores_the_prompt_without_generating(stack):
    """SGLang's prefill-only request (its test_logprob_match): the prompt's logprobs and nothing generated; a
    generation scored again this way gets back the logprobs it was sampled with."""
    logprobs = {"return_logprob": True, "logprob_start_len": 0}
    gen = _generate(stack, {"input_ids": COUNT_IDS, "sampling_params": {**GREEDY, "max_new_tokens": 4}, **logprobs})
    prefill_only = {"input_ids": COUNT_IDS + gen["output_ids"], "sampling_params": {"max_new_tokens": 0}, **logprobs}
    score = _generate(stack, prefill_only)
    meta = score["meta_info"]
    assert score["text"] == "" and score["output_ids"] == [] and meta["output_token_logprobs"] == []
    assert meta["finish_reason"] == {"type": "length", "length": 0} and meta["completion_tokens"] == 0
    scored = meta["input_token_logprobs"][len(COUNT_IDS) :]
    assert [t[1] for t in scored] == gen["output_ids"]
    assert all(abs(a[0] - b[0]) < 1e-2 for a, b in zip(scored, gen["meta_info"]["output_token_logprobs"]))
    events = sse_events(post(stack, "/generate", {**prefill_only, "stream": True}))
    assert events[-1]["output_ids"] == [] and events[-1]["meta_info"]["finish_reason"]["length"] == 0
    both = post(stack, "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 0, "min_new_tokens": 1}})
    assert both.status_code == 400 and both.json()["error"]["param"] == "sampling_params.min_new_tokens", both.text


def test_batch_and_n_answer_a_list_prompt_major(stack):
    batch = _generate(
        stack,
        {
            "text": [COUNT, "Hello"],
            "sampling_params": [GREEDY, {**GREEDY, "max_new_tokens": 2}],
            "rid": "b",
        },
    )
    assert [a["meta_info"]["id"] for a in batch] == ["b_0", "b_1"]
    assert batch[0]["text"] == " 4," and batch[1]["meta_info"]["completion_tokens"] == 2
    samples = _generate(stack, {"input_ids": [COUNT_IDS, [19556]], "sampling_params": {**GREEDY, "n": 2}})
    assert len(samples) == 4 and len({a["meta_info"]["id"] for a in samples}) == 4
    assert samples[0]["output_ids"] == samples[1]["output_ids"] == batch[0]["output_ids"]  # greedy samples agree
    one_n = _generate(stack, {"text": COUNT, "sampling_params": {"max_new_tokens": 2, "n": 2, "sampling_seed": 7}})
    assert isinstance(one_n, list) and len(one_n) == 2


def test_finish_reasons_are_sglangs(stack):
    stop = _generate(stack, {"text": COUNT, "sampling_params": {"temperature": 0, "max_new_tokens": 10, "stop": " 5"}})
    assert stop["meta_info"]["finish_reason"] == {"type": "stop", "matched": " 5"} and stop["text"] == " 4,"
    assert len(stop["output_ids"]) == 5  # the tokens that made the stop string are counted, its text trimmed
    kept = {"temperature": 0, "max_new_tokens": 10, "stop": " 5", "no_stop_trim": True}
    assert _generate(stack, {"text": COUNT, "sampling_params": kept})["text"] == " 4, 5"
    token = _generate(stack, {"text": COUNT, "sampling_params": {**GREEDY, "stop_token_ids": [28]}})
    assert token["meta_info"]["finish_reason"] == {"type": "stop", "matched": 28} and token["output_ids"][-1] == 28
    pattern = {"temperature": 0, "max_new_tokens": 10, "stop_regex": "[5-9]"}
    regex = _generate(stack, {"text": COUNT, "sampling_params": pattern})
    assert regex["meta_info"]["finish_reason"] == {"type": "stop", "matched": "[5-9]"}
    assert regex["text"] == " 4, " and len(regex["output_ids"]) == 5
    openai = post(
        stack, "/v1/completions", {"prompt": COUNT, "max_tokens": 10, "temperature": 0, "stop_regex": "[5-9]"}
    )
    assert openai.status_code == 200 and openai.json()["choices"][0]["text"] == " 4, ", openai.text
    eos = _generate(stack, {"text": COUNT, "sampling_params": {**GREEDY, "logit_bias": {"2": 100}}})
    assert eos["meta_info"]["finish_reason"] == {"type": "stop", "matched": 2} and eos["output_ids"] == [2]


def test_stream_is_sse_with_cumulative_answers_and_done(stack):
    answer = post(stack, "/generate", {"text": COUNT, "sampling_params": GREEDY, "stream": True})
    assert answer.status_code == 200 and answer.text.endswith("data: [DONE]\n\n")
    assert answer.headers["cache-control"] == "no-cache"
    events = sse_events(answer)
    assert [e["output_ids"] for e in events] == [events[-1]["output_ids"][: i + 1] for i in range(3)]
    assert events[-1]["text"] == " 4," and events[-1]["meta_info"]["finish_reason"]["type"] == "length"
    assert all(e["meta_info"]["finish_reason"] is None for e in events[:-1]) and "index" not in events[0]
    batch = sse_events(
        post(stack, "/generate", {"text": [COUNT, "Hi"], "sampling_params": {**GREEDY, "n": 2}, "stream": True})
    )
    finished = {e["index"] for e in batch if e["meta_info"]["finish_reason"]}
    assert finished == {0, 1, 2, 3}


def test_refused_and_bad_fields_are_400s_naming_them(stack):
    cases = {
        "image_data": ({"text": "hi", "image_data": "cat.png"}, "UNSUPPORTED_FIELD"),
        "lora_path": ({"text": "hi", "lora_path": "adapter"}, "UNSUPPORTED_FIELD"),
        "custom_logit_processor": ({"text": "hi", "custom_logit_processor": "x"}, "UNSUPPORTED_FIELD"),
        "return_hidden_states": ({"text": "hi", "return_hidden_states": True}, "UNSUPPORTED_FIELD"),
        "bootstrap_host": ({"text": "hi", "bootstrap_host": "10.0.0.1"}, "UNSUPPORTED_FIELD"),
        "bogus": ({"text": "hi", "bogus": 1}, "UNSUPPORTED_FIELD"),
        "sampling_params.stop_regex[0]": (
            {"text": "hi", "sampling_params": {"stop_regex": "(a"}},
            "INVALID_SAMPLING_PARAM",
        ),
        "sampling_params.temperature": ({"text": "hi", "sampling_params": {"temperature": "hot"}}, "INVALID_REQUEST"),
        "input_ids[1]": ({"input_ids": [1, 99999999]}, "TOKEN_ID_OUT_OF_VOCAB"),
        "input_ids[1][0]": ({"input_ids": [[1], [-5]]}, "TOKEN_ID_OUT_OF_VOCAB"),
        "sampling_params.max_new_tokens": (
            {"text": "hi", "sampling_params": {"max_new_tokens": 10**6}},
            "MAX_TOKENS_TOO_LARGE",
        ),
        "text": ({"text": 5}, "INVALID_REQUEST"),
    }
    for field, (body, reason) in cases.items():
        for stream in (False, True):
            answer = post(stack, "/generate", {**body, "stream": stream})
            assert answer.status_code == 400, (field, answer.text)
            assert error_reason(answer) == reason and answer.json()["error"]["param"] == field, answer.text
            assert answer.json()["error"]["message"]
    other_model = post(stack, "/generate", {"text": "hi", "model": "not-served"})
    assert other_model.status_code == 404 and error_reason(other_model) == "MODEL_NOT_FOUND"
    # what SMG's GenerateRequest sends besides the client's fields
    smg = {"model": "unknown", "return_text_in_logprobs": False, "stream": False, "log_metrics": True}
    smg |= {"background": False, "no_logs": False, "return_bytes": False, "return_entropy": False}
    accepted = {**smg, "text": "hi", "sampling_params": GREEDY, "image_data": None, "return_hidden_states": False}
    assert _generate(stack, {**accepted, "data_parallel_rank": 0})["meta_info"]["completion_tokens"] == 3


def test_a_client_that_goes_away_cancels_the_engine_work(stack):
    body = {"text": "Count:", "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True}, "stream": True}
    with requests.post(stack.rest_url + "/generate", json=body, stream=True, timeout=60) as answer:
        assert next(line for line in answer.iter_lines() if line).startswith(b"data: {")
    deadline = time.monotonic() + 10
    while _running(stack) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _running(stack) == 0


def _running(stack) -> int:
    loads = requests.get(stack.rest_url + "/loads?include=core", timeout=30).json()["loads"]
    return sum(entry["num_running_reqs"] + entry["num_waiting_reqs"] for entry in loads)
