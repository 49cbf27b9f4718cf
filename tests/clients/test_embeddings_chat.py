"""vLLM's chat-form embeddings (`messages` in place of `input`) through Envoy, the pipeline, render (the chat
template, then the pooling fields) and the pooling engine: one conversation is the vector of its templated text,
on `/v1/embeddings`, `/pooling` and SageMaker's `/invocations` alike (vLLM's tests/entrypoints/pooling/embed/
test_online.py `test_chat_request`, `test_invocations_chat_request`)."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from transformers import AutoTokenizer

from scaleout_common.models import resolve_model

MESSAGES = [
    {"role": "user", "content": "The cat sat on the mat."},
    {"role": "assistant", "content": "A feline was resting on a rug."},
    {"role": "user", "content": "Stars twinkle brightly in the night sky."},
]


@pytest.fixture(scope="module")
def http(pooling_stack):
    with httpx.Client(base_url=pooling_stack.rest_url, timeout=120) as client:
        yield client


def test_a_conversation_embeds_as_its_templated_text(http):
    text = AutoTokenizer.from_pretrained(resolve_model(None)).apply_chat_template(MESSAGES, tokenize=False)
    plain = http.post("/v1/embeddings", json={"input": text, "add_special_tokens": False}).json()
    chat = http.post("/v1/embeddings", json={"messages": MESSAGES, "encoding_format": "float"}).json()
    np.testing.assert_allclose(chat["data"][0]["embedding"], plain["data"][0]["embedding"], atol=1e-5)
    assert chat["usage"] == plain["usage"]
    invoked = http.post("/invocations", json={"messages": MESSAGES}).json()
    np.testing.assert_allclose(invoked["data"][0]["embedding"], plain["data"][0]["embedding"], atol=1e-5)
    pooled = http.post("/pooling", json={"messages": MESSAGES}).json()
    np.testing.assert_allclose(pooled["data"][0]["data"], plain["data"][0]["embedding"], atol=1e-5)
    prompted = http.post("/v1/embeddings", json={"messages": MESSAGES, "add_generation_prompt": True}).json()
    assert prompted["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"]  # the assistant turn's opening


def test_conflicts_and_batches_are_refused_naming_the_field(http):
    both = {"messages": MESSAGES, "continue_final_message": True, "add_generation_prompt": True}
    error = http.post("/v1/embeddings", json=both).json()["error"]
    assert error["message"] == "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
    assert http.post("/v1/embeddings", json={"messages": [MESSAGES]}).json()["error"]["param"] == "messages"
    assert http.post("/v1/embeddings", json={"messages": MESSAGES, "input": "x"}).json()["error"]["param"] == "messages"
    bad = http.post("/v1/embeddings", json={"messages": [{"role": "wiz ard", "content": "x"}]}).json()["error"]
    assert bad["param"] == "messages[0].role"
