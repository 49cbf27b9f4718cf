"""vLLM's `/score`, `/rerank` and `/pooling` field policies over an embedding model (every field honoured or refused,
named), the bi-encoder score math against torch's cosine_similarity, the answers' shapes against vLLM 0.33's own
response models, and `/invocations`' dispatch table."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pipeline_svc.faces.vllm_pooling import pooling_body, pooling_request
from pipeline_svc.faces.vllm_scoring import in_client_terms, parts, scoring_request
from pipeline_svc.faces.vllm_scoring_answer import cosine_scores, rerank_body, score_body
from pipeline_svc.faces.vllm_server import INVOCATION_KEYS, no_handler
from scaleout.v1 import engine_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail


def param_of(error) -> str:
    return error.violations[0][0]


def score(**body):
    return scoring_request(json.dumps(body).encode(), rerank=False)


def rerank(**body):
    return scoring_request(json.dumps(body).encode(), rerank=True)


def answer(rows, tokens=7, request_id="r") -> engine_pb2.EmbedResponse:
    response = engine_pb2.EmbedResponse(request_id=request_id, prompt_tokens=tokens)
    for row in rows:
        response.embeddings.add().values.extend(row)
    return response


def test_every_score_pair_and_the_pooling_fields_reach_one_embedding_request():
    for first, second in (("text_1", "text_2"), ("queries", "documents"), ("queries", "items"), ("data_1", "data_2")):
        parsed = score(**{first: "q", second: ["a", "b"]})
        assert (list(parsed.typed.inputs), parsed.names, parsed.single) == (
            ["q", "a", "b"],
            (first, second),
            (True, False),
        )
    parsed = score(
        text_1="q", text_2="d", model="m", truncate_prompt_tokens=4, truncation_side="left", use_activation=False,
        priority=3, request_id="r1", user="u", cache_salt="s", padding="do_not_pad", max_tokens_per_query=0,
        max_tokens_per_doc=2,
    )  # fmt: skip
    typed = parsed.typed
    assert (typed.model, typed.truncate_prompt_tokens, typed.truncation_side, typed.use_activation) == (
        "m", 4, "left", False,
    )  # fmt: skip
    assert (typed.priority, typed.request_id, parsed.identity, parsed.cuts) == (3, "r1", {"user": "u"}, (0, 2))
    assert not typed.HasField("add_special_tokens")  # render's default: special tokens added, as vLLM scores
    parsed = rerank(query="q", documents=["a", "b"], top_n=1, return_documents=False)
    assert (list(parsed.typed.inputs), parsed.top_n, parsed.return_documents) == (["q", "a", "b"], 1, False)


REFUSED = [
    (score, {"text_1": "a"}, Reason.MISSING_PROMPT, "text_1"),
    (score, {"text_1": ["a", "b"], "text_2": ["c"]}, Reason.INVALID_REQUEST, "text_2"),
    (score, {"text_1": [], "text_2": ["c"]}, Reason.MISSING_PROMPT, "text_1"),
    (score, {"text_1": "a", "text_2": []}, Reason.MISSING_PROMPT, "text_2"),
    (score, {"text_1": "a", "text_2": "b", "queries": "c"}, Reason.CONFLICTING_OPTIONS, "queries"),
    (score, {"text_1": "a", "text_2": [{"content": []}]}, Reason.UNSUPPORTED_FIELD, "text_2[0]"),
    (score, {"text_1": 5, "text_2": "b"}, Reason.INVALID_REQUEST, "text_1"),
    (score, {"text_1": "a", "text_2": "b", "instruction": "x"}, Reason.UNSUPPORTED_FIELD, "instruction"),
    (
        score,
        {"text_1": "a", "text_2": "b", "chat_template_kwargs": {}},
        Reason.UNSUPPORTED_FIELD,
        "chat_template_kwargs",
    ),
    (score, {"text_1": "a", "text_2": "b", "max_tokens_per_query": -1}, Reason.INVALID_REQUEST, "max_tokens_per_query"),
    (score, {"text_1": "a", "text_2": "b", "max_tokens_per_doc": True}, Reason.INVALID_REQUEST, "max_tokens_per_doc"),
    (score, {"text_1": "a", "text_2": "b", "top_n": 1}, Reason.UNSUPPORTED_FIELD, "top_n"),
    (score, {"text_1": "a", "text_2": "b", "mm_processor_kwargs": {}}, Reason.UNSUPPORTED_FIELD, "mm_processor_kwargs"),
    (score, {"text_1": "a", "text_2": "b", "normalize": True}, Reason.INVALID_REQUEST, "normalize"),
    (score, {"text_1": "a", "text_2": "b", "padding": "longest"}, Reason.UNSUPPORTED_FIELD, "padding"),
    (score, {"text_1": "a", "text_2": "b", "use_activation": 1}, Reason.INVALID_REQUEST, "use_activation"),
    (rerank, {"documents": ["a"]}, Reason.MISSING_PROMPT, "query"),
    (rerank, {"query": ["a"], "documents": ["b"]}, Reason.INVALID_REQUEST, "query"),
    (rerank, {"query": "a", "documents": ["b"], "top_n": -1}, Reason.INVALID_REQUEST, "top_n"),
    (rerank, {"query": "a", "documents": ["b"], "top_n": True}, Reason.INVALID_REQUEST, "top_n"),
    (rerank, {"query": "a", "documents": ["b"], "return_documents": "yes"}, Reason.INVALID_REQUEST, "return_documents"),
]


@pytest.mark.parametrize(("parse", "body", "reason", "param"), REFUSED)
def test_refused_fields_are_named(parse, body, reason, param):
    with pytest.raises(ServiceError) as caught:
        parse(**body)
    assert (caught.value.reason, param_of(caught.value)) == (reason, param)


def test_a_side_with_a_cut_renders_apart():
    whole = score(text_1="q", text_2=["a", "b"], max_tokens_per_query=0, priority=2)
    assert parts(whole) == [whole.typed]
    cut = score(text_1="q", text_2=["a", "b"], max_tokens_per_doc=5, priority=2)
    queries, documents = parts(cut)
    assert (list(queries.inputs), queries.max_text_tokens, queries.priority) == (["q"], 0, 2)
    assert (list(documents.inputs), documents.max_text_tokens, documents.priority) == (["a", "b"], 5, 2)
    message = "max_text_tokens (9000) must be a non-negative integer less than max_model_len (8192)."
    refused = score(text_1="q", text_2="a", max_tokens_per_query=3, max_tokens_per_doc=9000)
    error = in_client_terms(fail(Reason.INVALID_REQUEST, message, "max_text_tokens"), refused)
    assert (param_of(error), error.message.split(" ")[0]) == ("max_tokens_per_doc", "max_tokens_per_doc")


def test_render_errors_name_the_clients_side_and_index():
    parsed = score(text_1="q", text_2=["a", "b"])
    error = in_client_terms(fail(Reason.EMPTY_PROMPT, "inputs[2] must not be empty", "inputs[2]"), parsed)
    assert (param_of(error), error.message) == ("text_2[1]", "text_2[1] must not be empty")
    error = in_client_terms(fail(Reason.PROMPT_TOO_LONG, "too long", "inputs[0].token_ids"), parsed)
    assert param_of(error) == "text_1"


def test_cosine_scores_match_torch_one_to_n_and_n_to_n():
    rows = np.random.default_rng(0).standard_normal((5, 16)).astype(np.float32)
    one = torch.nn.functional.cosine_similarity(torch.tensor(rows[:1]), torch.tensor(rows[1:]), dim=1)
    np.testing.assert_allclose(cosine_scores(rows, 1), one.numpy(), atol=1e-6)
    pairs = torch.nn.functional.cosine_similarity(torch.tensor(rows[:2]), torch.tensor(rows[2:4]), dim=1)
    np.testing.assert_allclose(cosine_scores(rows[:4], 2), pairs.numpy(), atol=1e-6)
    assert cosine_scores(np.zeros((2, 4), np.float32), 1) == [0.0]  # a zero vector: 0, not NaN


def test_answers_fit_vllms_response_models():
    vllm = pytest.importorskip("vllm.entrypoints.pooling.scoring.protocol")
    pooling = pytest.importorskip("vllm.entrypoints.pooling.pooling.protocol")
    rows = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    body = score_body(answer(rows), score(text_1="q", text_2=["a", "b", "c"]), "m")
    assert vllm.ScoreResponse.model_validate(body).model_dump() == body
    assert [d["score"] for d in body["data"]] == pytest.approx([1.0, 0.0, 2**-0.5])
    ranked = rerank_body(answer(rows), rerank(query="q", documents=["a", "b", "c"], top_n=2), "m")
    assert vllm.RerankResponse.model_validate(ranked).model_dump() == ranked
    assert [r["index"] for r in ranked["results"]] == [0, 2] and ranked["id"] == "score-r"
    bare = rerank_body(answer(rows), rerank(query="q", documents=["a", "b", "c"], return_documents=False), "m")
    assert [set(r) for r in bare["results"]] == [{"index", "relevance_score"}] * 3
    parsed = pooling_request(json.dumps({"input": ["a", "b"], "task": "embed"}).encode())
    pooled = pooling_body(answer(rows[:2]), "m", parsed)
    assert pooling.PoolingResponse.model_validate(pooled).model_dump() == pooled and pooled["id"] == "pooling-r"


def test_pooling_takes_an_embeddings_body_with_task_embed():
    parsed = pooling_request(json.dumps({"input": "x", "task": "embed", "encoding_format": "base64"}).encode())
    assert (list(parsed.typed.inputs), parsed.encoding) == (["x"], "base64")
    for body, param in (({"input": "x", "task": "classify"}, "task"), ({"input": "x", "dimensions": 4}, "dimensions")):
        with pytest.raises(ServiceError) as caught:
            pooling_request(json.dumps(body).encode())
        assert param_of(caught.value) == param


def test_pooling_refuses_other_tasks_in_vllms_words():
    """vLLM's tests/entrypoints/pooling/scoring/test_bi_encoder_online.py `test_pooling_not_supported` matches these."""
    cases = {"classify": "Unsupported task: 'classify' ", "plugin": "No IOProcessor plugin installed."}
    for task, words in cases.items():
        with pytest.raises(ServiceError) as caught:
            pooling_request(json.dumps({"input": "x", "task": task}).encode())
        assert caught.value.message.startswith(words) and param_of(caught.value) == "task"
    with pytest.raises(ServiceError) as caught:
        pooling_request(json.dumps({"input": "x", "task": "t" * 10_000}).encode())
    assert len(caught.value.message) < 200  # the client's value quoted clipped


def test_invocations_dispatch_in_vllms_order_per_runner():
    routes = {runner: [(names, route) for names, _, route in keys] for runner, keys in INVOCATION_KEYS.items()}
    assert routes["generate"] == [(("messages",), "ChatCompletions"), (("prompt",), "Completions")]
    assert [route for _, route in routes["pooling"]][:3] == ["Embeddings", "Embeddings", "Rerank"]
    assert {route for _, route in routes["pooling"][3:]} == {"Score"}
    assert no_handler("pooling").endswith("['EmbeddingRequest', 'RerankRequest', 'ScoreRequest']")
    assert no_handler("generate").endswith("['ChatCompletionRequest', 'CompletionRequest']")
