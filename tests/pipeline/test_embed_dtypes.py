"""vLLM's `embed_dtype` for base64 embeddings: our numpy bytes are torch's `tensor.to(dtype)` bytes, bit for bit
(vLLM's tests/entrypoints/pooling/embed/test_online.py `test_base64_embed_dtype_and_endianness` decodes them so),
through `/v1/embeddings`' and `/pooling`'s request parsing and answer."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import torch

from pipeline_svc.embed_dtypes import EMBED_DTYPES, vector_bytes
from pipeline_svc.embeddings_request import embeddings_request
from pipeline_svc.embeddings_response import embeddings
from pipeline_svc.faces.vllm_pooling import pooling_body, pooling_request
from scaleout.v1 import engine_pb2

TORCH = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "fp8_e4m3": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2,
}
EDGES = [0.0, -0.0, 1.0, -1.0, 448, 449, 464, 465, 500, 57344, 61440, 7e4, 1e38, 1e-9, 2**-9, 2**-10, 3 * 2**-10]


def values() -> np.ndarray:
    rng = np.random.default_rng(0)
    scales = [1, 1e-2, 1e-4, 300, 1e5]
    drawn = np.concatenate([rng.normal(0, s, 4000) for s in scales] + [EDGES, [np.inf, -np.inf]])
    return drawn.astype(np.float32)


@pytest.mark.parametrize("dtype", EMBED_DTYPES)
def test_bytes_are_torchs_conversion_bit_for_bit(dtype):
    floats = values()
    expected = torch.tensor(floats).to(TORCH[dtype])
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[expected.element_size()]
    little = expected.view(view).numpy()
    assert vector_bytes(floats, dtype, "<") == little.astype(little.dtype.newbyteorder("<")).tobytes()
    assert vector_bytes(floats, dtype, ">") == little.astype(little.dtype.newbyteorder(">")).tobytes()


def test_embeddings_and_pooling_answer_in_the_asked_type_and_order():
    response = engine_pb2.EmbedResponse(request_id="r", prompt_tokens=3)
    response.embeddings.add().values.extend([0.1, -2.5, 3e-3])
    body = {"input": "x", "encoding_format": "base64", "embed_dtype": "float16", "endianness": "big"}
    parsed = embeddings_request(json.dumps(body).encode())
    answer = embeddings(response, "m", parsed.encoding, parsed.byte_order, parsed.embed_dtype)
    decoded = np.frombuffer(base64.b64decode(answer["data"][0]["embedding"]), dtype=">f2")
    assert decoded.tolist() == np.asarray([0.1, -2.5, 3e-3], dtype=np.float16).tolist()
    pooled = pooling_body(response, "m", pooling_request(json.dumps({**body, "embed_dtype": "bfloat16"}).encode()))
    top_halves = np.frombuffer(base64.b64decode(pooled["data"][0]["data"]), dtype=">u2")
    assert top_halves.tolist() == [0x3DCD, 0xC020, 0x3B45]  # 0.1, -2.5, 3e-3 rounded to bfloat16
