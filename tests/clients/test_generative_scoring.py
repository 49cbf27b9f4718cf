"""vLLM's `/generative_scoring` on the real stack: each item's score is the first label's share of the labels'
probabilities that `/v1/completions` reports for the same token prompt (vLLM's `logprob_token_ids`); the answer
parses as vLLM's own response model; errors name the client's fields."""

from __future__ import annotations

import math

import pytest
import requests
from vllm.entrypoints.generate.generative_scoring.serving import GenerativeScoringResponse

pytestmark = pytest.mark.slow


def _post(stack, path: str, body: dict) -> requests.Response:
    return requests.post(f"{stack.rest_url}{path}", json=body, timeout=60)


def _ids(stack, model_id, text: str, special: bool) -> list[int]:
    body = {"model": model_id, "prompt": text, "add_special_tokens": special}
    return _post(stack, "/tokenize", body).json()["tokens"]


@pytest.mark.parametrize("item_first", [False, True])
@pytest.mark.parametrize("apply_softmax", [True, False])
def test_scores_are_the_completion_routes_label_probabilities(stack, model_id, item_first, apply_softmax):
    query, items, labels = "Is this city a capital? Answer Yes or No: ", ["Paris", "New York"], [9454, 2753, 17]
    body = {"model": model_id, "query": query, "items": items, "label_token_ids": labels,
            "item_first": item_first, "apply_softmax": apply_softmax, "request_id": "g1"}  # fmt: skip
    answer = _post(stack, "/generative_scoring", body)
    assert answer.status_code == 200, answer.text
    scored = GenerativeScoringResponse.model_validate(answer.json())
    assert scored.id == "generative-scoring-g1" and [d.index for d in scored.data] == [0, 1]
    query_ids = _ids(stack, model_id, query, True)
    for item, result in zip(items, scored.data):
        item_ids = _ids(stack, model_id, item, False)
        prompt = item_ids + query_ids if item_first else query_ids + item_ids
        completion = _post(stack, "/v1/completions", {"model": model_id, "prompt": prompt, "max_tokens": 1,
                                                      "logprobs": 0, "logprob_token_ids": labels}).json()  # fmt: skip
        top = completion["choices"][0]["logprobs"]["top_logprobs"][0]
        probs = [math.exp(lp) for lp in top.values()][-len(labels) :]  # the labels, after the token itself
        expected = probs[0] / sum(probs) if apply_softmax else probs[0]
        assert result.score == pytest.approx(expected, rel=1e-3)
    assert scored.usage.completion_tokens == 2
    assert scored.usage.total_tokens == scored.usage.prompt_tokens + 2


@pytest.mark.parametrize(
    ("body", "param", "status"),
    [
        ({"label_token_ids": [9999999999]}, "label_token_ids", 400),  # not even an int32: the list's shape
        ({"label_token_ids": [5, 10**6]}, "label_token_ids[1]", 400),
        ({"items": [[1, 2], [3, 10**7]]}, "items[1][1]", 400),
        ({"items": [[1, 2], [3, 10**7]], "item_first": True}, "items[1][1]", 400),
        ({"query": [1, 10**7], "item_first": True}, "query[1]", 400),
        ({"query": [10**7, 1]}, "query[0]", 400),
        ({"items": ["x " * 9000]}, None, 400),  # longer than the context: refused, where vLLM cuts it
        ({"items": []}, "items", 400),
        ({"label_token_ids": None}, "label_token_ids", 400),
        ({"temperature": 0.3}, "temperature", 400),
    ],
)
def test_refusals_name_the_clients_field(stack, model_id, body, param, status):
    request = {"model": model_id, "query": "Q: ", "items": ["a"], "label_token_ids": [5, 6]} | body
    answer = _post(stack, "/generative_scoring", {k: v for k, v in request.items() if v is not None})
    assert answer.status_code == status, answer.text
    if param is not None:
        assert answer.json()["error"]["param"] == param


def test_sglangs_score_body_on_v1_score_reads_each_label(stack, model_id):
    """SGLang's `/v1/score` with `label_token_ids`: a row of label probabilities per item; token prompts read as
    vLLM's `/generative_scoring` reads them, per-item label lists, `temperature` sharpening the softmax."""
    query, items, labels = [504, 3458, 314], [[5230], [1017, 2017]], [9454, 2753]
    common = {"model": model_id, "query": query, "items": items}
    plain = _post(stack, "/v1/score", common | {"label_token_ids": labels}).json()
    assert plain["object"] == "scoring" and plain["model"] == model_id and len(plain["scores"]) == 2
    softmax = _post(stack, "/v1/score", common | {"label_token_ids": labels, "apply_softmax": True}).json()
    vllm = _post(stack, "/generative_scoring", common | {"label_token_ids": labels}).json()
    for row, raw, result in zip(softmax["scores"], plain["scores"], vllm["data"]):
        assert sum(row) == pytest.approx(1) and row[0] == pytest.approx(result["score"], rel=1e-4)
        assert row[0] == pytest.approx(raw[0] / sum(raw), rel=1e-4)  # over the vocabulary, then renormalized
    sharp = _post(stack, "/v1/score", common | {"label_token_ids": labels, "apply_softmax": True, "temperature": 0.5})
    for row, raw in zip(sharp.json()["scores"], plain["scores"]):
        assert row[0] == pytest.approx(raw[0] ** 2 / (raw[0] ** 2 + raw[1] ** 2), rel=1e-4)
    per_item = _post(stack, "/v1/score", common | {"label_token_ids": [[9454], [2753, 9454, 17]]}).json()["scores"]
    assert [len(row) for row in per_item] == [1, 3]
    assert per_item[0][0] == pytest.approx(plain["scores"][0][0], rel=1e-4)
    assert per_item[1][:2] == pytest.approx(plain["scores"][1][::-1], rel=1e-4)
    text = _post(stack, "/v1/score", {"model": model_id, "query": "The sky is", "items": " blue",
                                     "label_token_ids": labels}).json()  # fmt: skip
    assert len(text["scores"]) == 1 and len(text["scores"][0]) == 2


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"temperature": 0.5}, "temperature", "requires apply_softmax=True"),
        ({"label_token_ids": [5, 5]}, "label_token_ids", "duplicate"),
        ({"label_token_ids": [[5], [6]]}, "label_token_ids", "one list per item"),
        ({"items": [[1, 2]]}, "items", "both be text or both be token IDs"),
        ({"score_extraction_token": "<x>"}, "score_extraction_token", "setwise"),
        ({"return_token_logprobs": True}, "return_token_logprobs", "not supported"),
        ({"label_token_ids": [5, 10**6]}, "label_token_ids[1]", "vocab"),
    ],
)
def test_sglang_score_refusals_name_the_field(stack, model_id, body, param, words):
    answer = _post(
        stack, "/v1/score", {"model": model_id, "query": "Q", "items": ["a"], "label_token_ids": [5, 6]} | body
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == param and words in error["message"]


def test_vllms_label_routes_answer_errors_in_vllms_shape(stack, model_id):
    for path, body in (("/generative_scoring", {"query": "Q", "items": []}), ("/v1/systemone", {"state": "x"})):
        answer = _post(stack, path, {"model": model_id, "label_token_ids": [5], "questions": {}} | body)
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["type"] == "BadRequestError" and error["code"] == 400  # vLLM's ErrorResponse
