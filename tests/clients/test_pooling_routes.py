"""vLLM's other pooling routes over an embedding model, over HTTP through Envoy against the pooling stack (engine
`--runner pooling` on the default model): `/score`, `/rerank` (three paths), `/pooling` and SageMaker's
`/invocations`, each checked against the stack's own `/v1/embeddings` vectors (which test_embeddings.py holds to
transformers'); Cohere's `/v2/embed`; the engine's load and vllm: series counting pooling requests; and the routers
operators put in front (SMG, vllm-router) forwarding what they can."""

from __future__ import annotations

import base64
import threading
import time

import httpx
import numpy as np
import pytest

from devstack.routers import Router, RouterConfig

QUERY = "What is the capital of France?"
DOCS = ["Paris is the capital of France.", "Bananas are yellow.", "The French capital is Paris, on the Seine."]


@pytest.fixture(scope="module")
def http(pooling_stack):
    with httpx.Client(base_url=pooling_stack.rest_url, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def model(pooling_client) -> str:
    return pooling_client.models.list().data[0].id


def vectors(http, texts: list[str]) -> np.ndarray:
    answer = http.post("/v1/embeddings", json={"input": texts, "encoding_format": "float"}).json()
    return np.array([item["embedding"] for item in answer["data"]], dtype=np.float64)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_score_is_the_cosine_of_the_two_embeddings(http, model):
    rows = vectors(http, [QUERY, *DOCS])
    expected = [cosine(rows[0], row) for row in rows[1:]]
    for path in ("/score", "/v1/score"):
        answer = http.post(path, json={"model": model, "text_1": QUERY, "text_2": DOCS}).json()
        assert answer["object"] == "list" and answer["model"] == model and answer["id"].startswith("score-")
        assert [item["index"] for item in answer["data"]] == [0, 1, 2]
        assert {item["object"] for item in answer["data"]} == {"score"}
        np.testing.assert_allclose([item["score"] for item in answer["data"]], expected, atol=1e-5)
    pairs = http.post("/score", json={"queries": [QUERY, DOCS[1]], "documents": DOCS[:2]}).json()
    np.testing.assert_allclose(
        [item["score"] for item in pairs["data"]], [expected[0], cosine(rows[2], rows[2])], atol=1e-5
    )
    tokens = http.post("/v1/embeddings", json={"input": [QUERY, *DOCS]}).json()["usage"]["prompt_tokens"]
    assert answer["usage"] == {
        "prompt_tokens": tokens,
        "total_tokens": tokens,
        "completion_tokens": 0,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }


def test_each_side_is_cut_to_its_token_limit(http):
    """max_tokens_per_query / _doc cut the texts as vLLM does (SmolLM2's first two tokens of the document are
    "Paris" and " is"); the query stays whole."""
    rows = vectors(http, [QUERY, "Paris is"])
    body = {"text_1": QUERY, "text_2": DOCS[0], "max_tokens_per_query": 0, "max_tokens_per_doc": 2}
    answer = http.post("/score", json=body).json()
    assert answer["data"][0]["score"] == pytest.approx(cosine(*rows), abs=1e-5)
    whole = http.post("/v1/embeddings", json={"input": QUERY}).json()["usage"]["prompt_tokens"]
    assert answer["usage"]["prompt_tokens"] == whole + 2


def test_rerank_orders_documents_by_relevance_on_every_path(http, model):
    rows = vectors(http, [QUERY, *DOCS])
    expected = [cosine(rows[0], row) for row in rows[1:]]
    order = sorted(range(3), key=lambda i: -expected[i])
    for path in ("/rerank", "/v1/rerank", "/v2/rerank"):
        answer = http.post(path, json={"model": model, "query": QUERY, "documents": DOCS}).json()
        assert [r["index"] for r in answer["results"]] == order
        assert [r["document"] for r in answer["results"]] == [{"text": DOCS[i], "multi_modal": None} for i in order]
        np.testing.assert_allclose([r["relevance_score"] for r in answer["results"]], sorted(expected)[::-1], atol=1e-5)
    top = http.post("/rerank", json={"query": QUERY, "documents": DOCS, "top_n": 1, "return_documents": False})
    assert [set(r) for r in top.json()["results"]] == [{"index", "relevance_score"}]
    assert top.json()["results"][0]["index"] == order[0]


def test_pooling_answers_the_embeddings_vectors(http, model):
    rows = vectors(http, DOCS[:2])
    answer = http.post("/pooling", json={"model": model, "input": DOCS[:2], "task": "embed"}).json()
    assert answer["id"].startswith("pooling-") and [d["object"] for d in answer["data"]] == ["pooling"] * 2
    np.testing.assert_allclose([d["data"] for d in answer["data"]], rows, atol=1e-6)
    packed = http.post("/pooling", json={"input": DOCS[0], "encoding_format": "base64"}).json()["data"][0]["data"]
    np.testing.assert_allclose(np.frombuffer(base64.b64decode(packed), dtype="<f4"), rows[0], atol=1e-6)


def test_invocations_route_a_pooling_stacks_bodies(http):
    rows = vectors(http, [QUERY, DOCS[0]])
    embedded = http.post("/invocations", json={"input": [QUERY], "encoding_format": "float"}).json()
    np.testing.assert_allclose(embedded["data"][0]["embedding"], rows[0], atol=1e-6)
    reranked = http.post("/invocations", json={"query": QUERY, "documents": DOCS[:1]}).json()
    assert reranked["results"][0]["relevance_score"] == pytest.approx(cosine(*rows), abs=1e-5)
    scored = http.post("/invocations", json={"text_1": QUERY, "text_2": DOCS[0]}).json()
    assert scored["data"][0]["score"] == pytest.approx(cosine(*rows), abs=1e-5)
    refused = http.post("/invocations", json={"prompt": "hi"})
    assert refused.status_code == 400 and "EmbeddingRequest" in refused.json()["error"]["message"]


ERRORS = [
    ("/score", {"text_1": ["a", "b"], "text_2": ["c", "d", "e"]}, "INVALID_REQUEST", "text_2"),
    ("/score", {"text_1": "a", "text_2": "b", "instruction": "x"}, "UNSUPPORTED_FIELD", "instruction"),
    ("/score", {"text_1": "a", "text_2": "b", "chat_template_kwargs": {}}, "UNSUPPORTED_FIELD", "chat_template_kwargs"),
    ("/score", {"text_1": "a", "text_2": ["b", ""]}, "EMPTY_PROMPT", "text_2[1]"),
    ("/rerank", {"query": "a", "documents": ["b"], "top_n": -1}, "INVALID_REQUEST", "top_n"),
    ("/rerank", {"query": "a", "documents": [{"content": []}]}, "UNSUPPORTED_FIELD", "documents[0]"),
    (
        "/rerank",
        {"query": "a", "documents": ["b"], "max_tokens_per_doc": 9000},
        "INVALID_REQUEST",
        "max_tokens_per_doc",
    ),
    ("/score", {"text_1": "a", "text_2": ["b", ""], "max_tokens_per_doc": 3}, "EMPTY_PROMPT", "text_2[1]"),
    ("/pooling", {"input": "a", "task": "classify"}, "UNSUPPORTED_FIELD", "task"),
    ("/pooling", {"input": "a", "dimensions": 8}, "UNSUPPORTED_FIELD", "dimensions"),
]


@pytest.mark.parametrize(("path", "body", "reason", "param"), ERRORS)
def test_errors_are_vllms_shape_naming_the_field(http, path, body, reason, param):
    """vLLM's ErrorResponse (`code` the status, `type` vLLM's name for it), the stable reason in `details`."""
    answer = http.post(path, json=body)
    error = answer.json()["error"]
    assert (answer.status_code, error["code"], error["param"], error["type"]) == (400, 400, param, "BadRequestError")
    assert reason in [detail.get("reason") for detail in error["details"]]


def test_load_and_vllm_series_count_pooling_requests(pooling_stack, http):
    """A batch of long inputs keeps the pooler busy; /get_load and the engine's vllm: series see it meanwhile, and
    the finished requests are counted as vLLM counts pooling requests."""
    before = http.get("/metrics").text
    with httpx.Client(base_url=pooling_stack.rest_url, timeout=120) as other:
        body = {"input": [" ".join(["word"] * 400)] * 6}
        worker = threading.Thread(target=lambda: other.post("/v1/embeddings", json=body))
        worker.start()
        seen = 0
        deadline = time.monotonic() + 60
        while worker.is_alive() and time.monotonic() < deadline and not seen:
            seen = http.get("/get_load").json()["load"]
            time.sleep(0.05)
        worker.join()
    assert seen > 0
    assert http.get("/get_load").json()["load"] == 0
    after = http.get("/metrics").text
    assert success(after) - success(before) >= 6


def success(text: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total{") and 'finished_reason="stop"' in line
    )


@pytest.mark.parametrize("kind", ["smg", "vllm-router"])
def test_a_router_forwards_embeddings(pooling_stack, http, model, kind, tmp_path):
    """Both routers forward `/v1/embeddings` (SMG's typed body needs `model`); vllm-router passes vLLM's `/v2/rerank`
    and `/score` through untouched. Their `/rerank` and `/v1/rerank` are SGLang's (docs/engine.md says why they
    fail in front of this stack, as in front of vLLM), and SMG serves no `/v2/rerank` or `/score`."""
    rows = vectors(http, [QUERY, DOCS[0]])
    config = RouterConfig(kind, "round_robin", [pooling_stack.rest_url], log_path=tmp_path / f"{kind}.log")
    with Router(config) as router, httpx.Client(base_url=router.url, timeout=120) as client:
        body = {"model": model, "input": [QUERY], "encoding_format": "float"}
        embedded = client.post("/v1/embeddings", json=body)
        assert embedded.status_code == 200, embedded.text
        np.testing.assert_allclose(embedded.json()["data"][0]["embedding"], rows[0], atol=1e-6)
        if kind == "vllm-router":
            reranked = client.post("/v2/rerank", json={"model": model, "query": QUERY, "documents": DOCS[:1]})
            assert reranked.json()["results"][0]["relevance_score"] == pytest.approx(cosine(*rows), abs=1e-5)
            scored = client.post("/score", json={"model": model, "text_1": QUERY, "text_2": DOCS[0]})
            assert scored.json()["data"][0]["score"] == pytest.approx(cosine(*rows), abs=1e-5)


def test_cohere_v2_embed_answers_every_type(http, model):
    rows = vectors(http, DOCS[:2]).astype(np.float32)
    body = {"model": model, "texts": DOCS[:2], "embedding_types": ["float", "base64", "ubinary"]}
    answer = http.post("/v2/embed", json=body).json()
    assert answer["response_type"] == "embeddings_by_type" and answer["texts"] == DOCS[:2]
    np.testing.assert_allclose(answer["embeddings"]["float"], rows, atol=1e-6)
    packed = [np.frombuffer(base64.b64decode(text), dtype="<f4") for text in answer["embeddings"]["base64"]]
    np.testing.assert_allclose(packed, rows, atol=1e-6)
    assert answer["embeddings"]["ubinary"] == np.packbits(rows >= 0, axis=-1).tolist()
    assert answer["meta"]["billed_units"]["input_tokens"] > 0
    refused = http.post("/v2/embed", json={"texts": ["a " * 50], "truncate": "NONE", "max_tokens": 4})
    assert (refused.status_code, refused.json()["error"]["param"], refused.json()["error"]["code"]) == (
        400,
        "texts[0]",
        400,
    )


def test_a_generate_stack_answers_404_as_vllm(stack):
    """A stack that generates serves no pooling route: its engine refuses Embed (ROUTE_NOT_ENABLED)."""
    with httpx.Client(base_url=stack.rest_url, timeout=60) as client:
        for path, body in (("/score", {"text_1": "a", "text_2": "b"}), ("/rerank", {"query": "a", "documents": ["b"]})):
            answer = client.post(path, json=body)
            error = answer.json()["error"]
            assert (answer.status_code, error["type"], error["code"]) == (404, "NotFoundError", 404), answer.text
            assert "ROUTE_NOT_ENABLED" in [detail.get("reason") for detail in error["details"]]
