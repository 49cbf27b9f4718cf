"""Render's `max_text_tokens` (vLLM's scoring max_tokens_per_query / _doc): each text cut as vLLM's own
truncate_text_to_tokens cuts it, then tokenized; its bounds refused naming it."""

from __future__ import annotations

import pytest

from render_svc.embedding import render_embedding
from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason

TEXTS = ["Paris is the capital of France.", "Bananas are yellow", "ok", "naïve café — déjà vu, über-straße!"]


@pytest.mark.parametrize("most", [1, 2, 3, 7])
def test_texts_are_cut_as_vllm_cuts_them(renderers, most):
    utils = pytest.importorskip("vllm.entrypoints.pooling.scoring.utils")
    renderer = renderers["default"]
    tokenizer = renderer.model.tokenizer
    request = render_pb2.RenderEmbeddingRequest(inputs=TEXTS, max_text_tokens=most)
    got = [list(s.token_ids) for s in render_embedding(renderer, request).embed_request.inputs]
    expected = [tokenizer(utils.truncate_text_to_tokens(text, tokenizer, most))["input_ids"] for text in TEXTS]
    assert got == expected
    assert all(len(ids) <= most for ids in got)  # SmolLM2 adds no special tokens


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"inputs": ["x"], "max_text_tokens": -1}, Reason.INVALID_REQUEST),
        ({"inputs": ["x"], "max_text_tokens": 8192}, Reason.INVALID_REQUEST),
        ({"input_token_ids": [render_pb2.TokenIds(token_ids=[1])], "max_text_tokens": 2}, Reason.CONFLICTING_OPTIONS),
    ],
)
def test_bounds_are_refused_naming_it(renderers, fields, reason):
    with pytest.raises(ServiceError) as caught:
        render_embedding(renderers["default"], render_pb2.RenderEmbeddingRequest(**fields))
    assert (caught.value.reason, caught.value.violations[0][0]) == (reason, "max_text_tokens")
