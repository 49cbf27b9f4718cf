"""vLLM's score and rerank answers from the engine's vectors (the requests: vllm_scoring.py).

The math, as vLLM's bi-encoder scores: a pair's score is the cosine similarity of its query's and its document's
vectors (float32 vectors; the dot product over the product of the norms, bounded below by 1e-8 as torch's
cosine_similarity bounds it; computed in float64). One query is paired with every document (1:N), else query i
with document i. `usage` counts each query's and document's tokens once (vLLM sums its engine inputs' prompts).
The bodies are vLLM 0.33's ScoreResponse (id `score-<request_id>`; its UsageInfo whole) and RerankResponse (the
same id; results by relevance, highest first, the best `top_n` where 0 < top_n < the documents).
"""

from __future__ import annotations

import time

import numpy as np

from pipeline_svc.embeddings_response import usage_info
from pipeline_svc.faces.vllm_scoring import ScoringRequest
from scaleout.v1 import engine_pb2

EPS = 1e-8


def cosine_scores(vectors: np.ndarray, queries: int) -> list[float]:
    """Each pair's score: `vectors` holds the queries' rows, then the documents'."""
    first, second = vectors[:queries].astype(np.float64), vectors[queries:].astype(np.float64)
    if len(first) == 1:
        first = np.repeat(first, len(second), axis=0)
    norms = np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1)
    return ((first * second).sum(axis=1) / np.maximum(norms, EPS)).tolist()


def _scores(response: engine_pb2.EmbedResponse, request: ScoringRequest) -> list[float]:
    vectors = np.array([list(item.values) for item in response.embeddings], dtype=np.float32)
    return cosine_scores(vectors, len(request.queries))


def score_body(response: engine_pb2.EmbedResponse, request: ScoringRequest, model: str) -> dict:
    return {
        "id": f"score-{response.request_id}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": [{"index": i, "object": "score", "score": s} for i, s in enumerate(_scores(response, request))],
        "usage": usage_info(response.prompt_tokens),
    }


def rerank_body(response: engine_pb2.EmbedResponse, request: ScoringRequest, model: str) -> dict:
    results = []
    for i, score in enumerate(_scores(response, request)):
        result: dict = {"index": i}
        if request.return_documents:
            result["document"] = {"text": request.documents[i], "multi_modal": None}
        result["relevance_score"] = score
        results.append(result)
    results.sort(key=lambda result: result["relevance_score"], reverse=True)  # stable: ties keep their order
    if 0 < request.top_n < len(results):
        results = results[: request.top_n]
    tokens = response.prompt_tokens
    return {
        "id": f"score-{response.request_id}",
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        "results": results,
    }
