"""Cohere's `/v2/embed` field policy (every field honoured or refused, named) and its answer's types, against vLLM
0.33's own packing and response model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline_svc.faces.cohere_embed import check_lengths, cohere_body, cohere_embed_request
from scaleout.v1 import engine_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason


def parse(**body):
    return cohere_embed_request(json.dumps(body).encode())


def test_truncation_dimensions_and_types_reach_the_typed_request():
    typed = parse(texts=["a", "b"], model="m", priority=2, output_dimension=8).typed
    assert (list(typed.inputs), typed.model, typed.priority, typed.dimensions) == (["a", "b"], "m", 2, 8)
    assert (typed.truncate_prompt_tokens, typed.truncation_side) == (-1, "")  # END: every token that fits
    typed = parse(texts=["a"], truncate="START", max_tokens=5).typed
    assert (typed.truncate_prompt_tokens, typed.truncation_side) == (5, "left")
    none = parse(texts=["a"], truncate="NONE", max_tokens=2)
    assert not none.typed.HasField("truncate_prompt_tokens") and none.most_tokens == 2
    rendered = engine_pb2.EmbedRequest()
    rendered.inputs.add().token_ids.extend([1, 2, 3])
    with pytest.raises(ServiceError) as caught:
        check_lengths(none, rendered)
    assert caught.value.reason == Reason.PROMPT_TOO_LONG and "max_tokens=2 with truncate=NONE" in caught.value.message
    assert parse(texts=["a"], embedding_types=["binary", "float"]).types == ["binary", "float"]


@pytest.mark.parametrize(
    ("body", "reason", "param"),
    [
        ({}, Reason.MISSING_PROMPT, "texts"),
        ({"texts": []}, Reason.MISSING_PROMPT, "texts"),
        ({"texts": ["a"], "images": ["data:"]}, Reason.UNSUPPORTED_FIELD, "images"),
        ({"texts": ["a"], "inputs": []}, Reason.UNSUPPORTED_FIELD, "inputs"),
        ({"texts": ["a"], "input_type": "search_query"}, Reason.UNSUPPORTED_FIELD, "input_type"),
        ({"texts": ["a"], "embedding_types": ["int8"]}, Reason.INVALID_REQUEST, "embedding_types"),
        ({"texts": ["a"], "truncate": "MIDDLE"}, Reason.INVALID_REQUEST, "truncate"),
        ({"texts": ["a"], "max_tokens": "5"}, Reason.INVALID_REQUEST, "max_tokens"),
        ({"texts": ["a"], "user": "u"}, Reason.UNSUPPORTED_FIELD, "user"),
    ],
)
def test_refused_fields_are_named(body, reason, param):
    with pytest.raises(ServiceError) as caught:
        parse(**body)
    assert (caught.value.reason, caught.value.violations[0][0]) == (reason, param)


def test_every_type_is_packed_as_vllm_packs_it():
    protocol = pytest.importorskip("vllm.entrypoints.pooling.embed.protocol")
    rows = np.random.default_rng(1).standard_normal((2, 16)).astype(np.float32)
    response = engine_pb2.EmbedResponse(request_id="r", prompt_tokens=4)
    for row in rows:
        response.embeddings.add().values.extend(row.tolist())
    request = parse(texts=["a", "b"], embedding_types=list(protocol.CohereEmbedByTypeEmbeddings.model_fields))
    body = cohere_body(response, request)
    expected = protocol.build_typed_embeddings(rows.tolist(), request.types).model_dump()
    assert body["embeddings"] == expected
    model = protocol.CohereEmbedResponse.model_validate(body)
    assert model.model_dump(exclude_none=True) == body and body["id"] == "embd-r"
    narrow = engine_pb2.EmbedResponse()
    narrow.embeddings.add().values.extend([1.0, -1.0, 0.5])
    with pytest.raises(ServiceError) as caught:
        cohere_body(narrow, parse(texts=["a"], embedding_types=["ubinary"]))
    assert "multiple of 8" in caught.value.message
