"""vLLM's two logprob extensions of the OpenAI API, through the official `openai` SDK against the real stack, the
answers parsed by vLLM 0.33's own response models (vLLM's test_chat / test_chat_echo / test_logprob_token_ids):

- `prompt_logprobs` on a unary chat answer: top level, null for the first prompt token, then per position the
  prompt's own token (with its rank) and the alternatives; refused with `stream: true`, as vLLM refuses it;
- `logprob_token_ids` (with `logprobs`): each token's `top_logprobs` are the sampled token, then every named id once,
  whatever `top_logprobs` says; on chat and completions, unary and streamed.
"""

from __future__ import annotations

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionResponse

pytestmark = pytest.mark.slow

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is the capital of France?"}]
AS_IDS = {"return_tokens_as_token_ids": True}


def _id(token: str) -> int:
    assert token.startswith("token_id:")
    return int(token.removeprefix("token_id:"))


@pytest.mark.parametrize("k", [0, 2])
def test_chat_prompt_logprobs_are_vllms_top_level_list(client, model_id, k):
    raw = client.chat.completions.with_raw_response.create(
        model=model_id, messages=USER, max_tokens=2, temperature=0, extra_body={"prompt_logprobs": k, **AS_IDS}
    )
    assert raw.parse().choices[0].message.role == "assistant"  # the SDK reads it too
    parsed = ChatCompletionResponse.model_validate_json(raw.http_response.text)
    positions = parsed.prompt_logprobs
    assert positions is not None and positions[0] is None and len(positions) == parsed.usage.prompt_tokens
    for position in positions[1:]:
        assert position is not None and 1 <= len(position) <= k + 1
        own = next(iter(position.values()))  # the prompt's own token first, with its rank in the distribution
        assert own.rank is not None and own.rank >= 1 and own.logprob <= 0 and own.decoded_token
    unasked = client.chat.completions.create(model=model_id, messages=USER, max_tokens=2)
    assert unasked.model_dump().get("prompt_logprobs") is None


def test_chat_prompt_logprobs_are_refused_streamed_and_past_the_bound(client, model_id):
    for extra, stream in (({"prompt_logprobs": 0}, True), ({"prompt_logprobs": -1}, False)):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model=model_id, messages=USER, max_tokens=2, stream=stream, extra_body=extra)
        assert isinstance(refused.value.body, dict) and refused.value.body["param"] == "prompt_logprobs"


@pytest.mark.parametrize(("named", "sampled"), [([5000], 42), ([100, 1000, 5000], 42), ([100, 1000, 5000], 5000)])
def test_logprob_token_ids_are_each_tokens_alternatives(client, model_id, named, sampled):
    body = {"logprob_token_ids": named, "allowed_token_ids": [sampled], **AS_IDS}
    chat = client.chat.completions.create(
        model=model_id, messages=USER, max_tokens=1, temperature=0, logprobs=True, top_logprobs=1, extra_body=body
    )
    assert chat.choices[0].logprobs is not None and chat.choices[0].logprobs.content is not None
    [token] = chat.choices[0].logprobs.content
    shown = [_id(entry.token) for entry in token.top_logprobs]
    assert _id(token.token) == sampled and shown[0] == sampled and shown == list(dict.fromkeys([sampled, *named]))
    assert all(-9999.0 <= entry.logprob <= 0 for entry in token.top_logprobs)
    text = client.completions.create(
        model=model_id, prompt="Hello", max_tokens=1, temperature=0, logprobs=5, extra_body=body
    )
    assert text.choices[0].logprobs is not None and text.choices[0].logprobs.top_logprobs is not None
    assert list(text.choices[0].logprobs.top_logprobs[0]) == [f"token_id:{i}" for i in dict.fromkeys([sampled, *named])]


def test_logprob_token_ids_streamed(client, model_id):
    body = {"logprob_token_ids": [5000], "allowed_token_ids": [42], **AS_IDS}
    stream = client.chat.completions.create(
        model=model_id, messages=USER, max_tokens=1, temperature=0, logprobs=True, stream=True, extra_body=body
    )
    shown = [
        _id(entry.token)
        for chunk in stream
        if chunk.choices and chunk.choices[0].logprobs and chunk.choices[0].logprobs.content
        for content in chunk.choices[0].logprobs.content
        for entry in content.top_logprobs
    ]
    assert shown == [42, 5000]


def test_logprob_token_ids_are_refused_without_logprobs_or_past_the_bound(client, model_id):
    for extra, logprobs in (({"logprob_token_ids": [5]}, False), ({"logprob_token_ids": list(range(129))}, True)):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model=model_id, messages=USER, max_tokens=1, logprobs=logprobs, extra_body=extra
            )
        assert isinstance(refused.value.body, dict) and refused.value.body["param"] == "logprob_token_ids"
        assert len(refused.value.body["message"]) < 200  # the count, never the ids
