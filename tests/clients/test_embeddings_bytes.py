"""vLLM's binary embeddings (`encoding_format` "bytes" / "bytes_only") through Envoy, the pipeline, render and the
pooling engine: the body is the vectors' bytes in the asked type and order, "bytes" with vLLM's `metadata` header
(offsets, shapes, usage), "bytes_only" with none; `/v1/embeddings` and `/pooling` alike (vLLM's
tests/entrypoints/pooling/embed/test_online.py `test_bytes_embed_dtype_and_endianness`, `test_bytes_only_*`)."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

TEXTS = ["Hello world", "The quick brown fox jumps over the lazy dog."]


@pytest.fixture(scope="module")
def http(pooling_stack):
    with httpx.Client(base_url=pooling_stack.rest_url, timeout=120) as client:
        yield client


def test_bytes_carry_the_float_vectors_and_vllms_metadata(http):
    floats = http.post("/v1/embeddings", json={"input": TEXTS, "encoding_format": "float"}).json()
    expected = np.array([item["embedding"] for item in floats["data"]], dtype=np.float32)
    body = {"input": TEXTS, "encoding_format": "bytes", "embed_dtype": "float16", "endianness": "big"}
    answer = http.post("/v1/embeddings", json=body)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/octet-stream"
    meta = json.loads(answer.headers["metadata"])
    assert meta["usage"] == floats["usage"] and meta["id"].startswith("embd-") and meta["model"] == floats["model"]
    width = expected.shape[1]
    assert [(i["index"], i["start"], i["end"], i["shape"]) for i in meta["data"]] == [
        (0, 0, 2 * width, [width]),
        (1, 2 * width, 4 * width, [width]),
    ]
    assert {(i["embed_dtype"], i["endianness"]) for i in meta["data"]} == {("float16", "big")}
    decoded = np.frombuffer(answer.content, dtype=">f2").reshape(2, width)
    np.testing.assert_array_equal(decoded, expected.astype(np.float16))


def test_bytes_only_sends_the_body_alone_on_both_routes(http):
    floats = http.post("/v1/embeddings", json={"input": TEXTS, "encoding_format": "float"}).json()
    expected = np.array([item["embedding"] for item in floats["data"]], dtype=np.float32)
    for path in ("/v1/embeddings", "/pooling"):
        answer = http.post(path, json={"input": TEXTS, "encoding_format": "bytes_only"})
        assert answer.status_code == 200 and "metadata" not in answer.headers
        np.testing.assert_array_equal(np.frombuffer(answer.content, dtype="<f4").reshape(expected.shape), expected)
