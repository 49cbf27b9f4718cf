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
