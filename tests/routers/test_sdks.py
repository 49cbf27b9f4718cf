"""The official openai and anthropic SDKs through each router in front of two stacks, as an operator's users
would point them at it: chat, completions, Responses and Messages, unary and streamed, and SGLang's /generate as
slime's rollouts call it. No proxy, no flag beyond the routers' documented ones (conftest.py). A failure shows the
router's log lines written during the test."""

from __future__ import annotations

import anthropic
import pytest
import requests

from tests.sdks import openai_sdk

pytestmark = pytest.mark.slow

QUESTION = "What is the capital of France?"
SHORT = dict(temperature=0)


@pytest.fixture(scope="module")
def client(router):
    with openai_sdk(router.url, timeout=60) as sdk:
        yield sdk


@pytest.fixture(scope="module")
def claude(router):
    with anthropic.Anthropic(base_url=router.url, api_key="unused", max_retries=0, timeout=60) as sdk:
        yield sdk


def test_models(client, model_id):
    assert model_id in [model.id for model in client.models.list().data]


def test_chat(client, model_id):
    answer = client.chat.completions.create(
        model=model_id, messages=[{"role": "user", "content": QUESTION}], max_tokens=4, **SHORT
    )
    assert answer.choices[0].message.content and answer.choices[0].finish_reason in ("stop", "length")
    assert answer.usage and answer.usage.completion_tokens > 0


def test_chat_streamed(client, model_id):
    chunks = list(
        client.chat.completions.create(
            model=model_id, messages=[{"role": "user", "content": QUESTION}], max_tokens=4, stream=True, **SHORT
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and any(c.choices and c.choices[0].finish_reason for c in chunks)


def test_completions(client, model_id):
    answer = client.completions.create(model=model_id, prompt="The capital of France is", max_tokens=4, **SHORT)
    assert answer.choices[0].text and answer.choices[0].finish_reason in ("stop", "length")


def test_completions_streamed(client, model_id):
    chunks = list(
        client.completions.create(model=model_id, prompt="The capital of France is", max_tokens=4, stream=True, **SHORT)
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices)
    assert any(c.choices and c.choices[0].finish_reason for c in chunks)


def test_responses(client, model_id):
    response = client.responses.create(model=model_id, input=QUESTION, max_output_tokens=8, **SHORT)
    assert response.status in ("completed", "incomplete") and response.output_text


def test_responses_streamed(client, model_id):
    events = list(client.responses.create(model=model_id, input=QUESTION, max_output_tokens=8, stream=True, **SHORT))
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] in ("response.completed", "response.incomplete"), kinds
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta")


def test_messages(claude, model_id):
    message = claude.messages.create(
        model=model_id, max_tokens=8, messages=[{"role": "user", "content": QUESTION}], extra_body=SHORT
    )
    assert message.content[0].type == "text" and message.content[0].text
    assert message.stop_reason in ("end_turn", "max_tokens")


def test_messages_streamed(claude, model_id):
    with claude.messages.stream(
        model=model_id, max_tokens=8, messages=[{"role": "user", "content": QUESTION}], extra_body=SHORT
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.stop_reason in ("end_turn", "max_tokens")


# SGLang's native /generate as slime's rollouts send it (token ids in, logprobs out), through each router.
GENERATE = {"input_ids": [791, 6328, 282, 4649, 314], "sampling_params": {"max_new_tokens": 4, "temperature": 0}}


def test_sglang_generate(router):
    answer = requests.post(router.url + "/generate", json=GENERATE | {"return_logprob": True}, timeout=60)
    assert answer.status_code == 200, answer.text[:300]
    out = answer.json()
    assert out["output_ids"] and out["meta_info"]["finish_reason"]["type"] in ("stop", "length")
    assert [entry[1] for entry in out["meta_info"]["output_token_logprobs"]] == out["output_ids"]


def test_sglang_generate_streamed(router):
    with requests.post(router.url + "/generate", json=GENERATE | {"stream": True}, stream=True, timeout=60) as answer:
        assert answer.status_code == 200, answer.text[:300]
        events = [line[len("data: ") :] for line in answer.iter_lines(decode_unicode=True) if line]
    assert events[-1] == "[DONE]" and '"finish_reason"' in events[-2]
