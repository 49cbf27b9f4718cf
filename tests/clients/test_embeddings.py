"""`client.embeddings.create` (the official SDK) through Envoy, the pipeline, render and an engine started with
`--runner pooling` on the default model: vectors as transformers computes them, float and base64 alike, batches,
vLLM's extras, and errors in OpenAI's shape. A generate engine answers 404, as vLLM does."""

from __future__ import annotations

import base64

import numpy as np
import openai
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from scaleout_common.models import resolve_model

TEXTS = ["Hello world", "The quick brown fox jumps over the lazy dog.", "Embeddings pool the last token."]


@pytest.fixture(scope="module")
def reference():
    """transformers' final hidden state (after the final norm) of each text's last token, L2-normalized."""
    folder = resolve_model(None)
    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        rows = [model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0, -1] for text in TEXTS]
    return tokenizer, torch.nn.functional.normalize(torch.stack(rows), dim=-1).numpy()


def error_of(call) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as caught:
        call()
    return caught.value


def test_a_batch_of_texts_embeds_as_transformers_pools_it(pooling_client, reference):
    tokenizer, expected = reference
    model = pooling_client.models.list().data[0].id
    floats = pooling_client.embeddings.create(model=model, input=TEXTS, encoding_format="float")
    encoded = pooling_client.embeddings.create(model=model, input=TEXTS)  # the SDK asks for base64 and decodes it
    raw = pooling_client.embeddings.with_raw_response.create(model=model, input=TEXTS[:1], encoding_format="base64")
    got = np.array([item.embedding for item in floats.data], dtype=np.float32)
    assert [item.index for item in floats.data] == [0, 1, 2] and floats.object == "list" and floats.model == model
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert np.array_equal(np.array([item.embedding for item in encoded.data], dtype=np.float32), got)
    alone = pooling_client.embeddings.create(model=model, input=TEXTS[:1], encoding_format="float").data[0]
    text = raw.http_response.json()["data"][0]["embedding"]
    assert np.array_equal(np.frombuffer(base64.b64decode(text), dtype="<f4"), np.float32(alone.embedding))
    tokens = sum(len(tokenizer(text)["input_ids"]) for text in TEXTS)
    assert (floats.usage.prompt_tokens, floats.usage.total_tokens) == (tokens, tokens)


def test_token_ids_and_vllm_extras(pooling_client, reference):
    tokenizer, expected = reference
    model = pooling_client.models.list().data[0].id
    ids = [tokenizer(text)["input_ids"] for text in TEXTS[:2]]
    batch = pooling_client.embeddings.create(model=model, input=ids, encoding_format="float")
    np.testing.assert_allclose([item.embedding for item in batch.data], expected[:2], atol=1e-4)
    one = pooling_client.embeddings.create(model=model, input=ids[1], encoding_format="float")
    np.testing.assert_allclose(one.data[0].embedding, expected[1], atol=1e-4)
    cut = pooling_client.embeddings.create(
        model=model, input=[1] * 9000, encoding_format="float", extra_body={"truncate_prompt_tokens": 16}
    )
    assert cut.usage.prompt_tokens == 16
    raw = pooling_client.embeddings.create(
        model=model, input=TEXTS[0], encoding_format="float", extra_body={"use_activation": False, "priority": 1}
    )
    vector = np.array(raw.data[0].embedding)
    np.testing.assert_allclose(vector / np.linalg.norm(vector), expected[0], atol=1e-4)
    assert abs(np.linalg.norm(vector) - 1) > 0.1


ERRORS = [
    ({"input": "x", "dimensions": 8}, "UNSUPPORTED_FIELD", "dimensions"),
    ({"input": [1] * 9000}, "PROMPT_TOO_LONG", "input"),
    ({"input": ["a", ""]}, "EMPTY_PROMPT", "input[1]"),
    ({"input": "x", "extra_body": {"no_such_field": 1}}, "UNSUPPORTED_FIELD", "no_such_field"),
    ({"input": "x", "encoding_format": "hex"}, "UNSUPPORTED_FIELD", "encoding_format"),
]


@pytest.mark.parametrize(("fields", "code", "param"), ERRORS)
def test_errors_are_openais_shape_with_a_stable_reason(pooling_client, fields, code, param):
    model = pooling_client.models.list().data[0].id
    error = error_of(lambda: pooling_client.embeddings.create(model=model, **fields))
    assert isinstance(error, openai.BadRequestError)
    assert (error.status_code, error.code, error.param, error.type) == (400, code, param, "invalid_request_error")


def test_a_pooling_engine_does_not_generate(pooling_client):
    model = pooling_client.models.list().data[0].id
    error = error_of(lambda: pooling_client.completions.create(model=model, prompt="hi", max_tokens=2))
    assert (error.status_code, error.code) == (404, "ROUTE_NOT_ENABLED")


def test_a_generate_engine_answers_404_as_vllm(client, model_id):
    error = error_of(lambda: client.embeddings.create(model=model_id, input="hi"))
    assert isinstance(error, openai.NotFoundError)
    assert error.code == "ROUTE_NOT_ENABLED" and "--runner pooling" in error.message
