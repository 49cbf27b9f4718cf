"""vLLM's `return_token_ids` through the official SDKs' `extra_body`, on the one-hop chat and completion routes
(as vLLM), and on Responses and Anthropic Messages (our extension), unary and streamed: the prompt's ids are the
tokenizer's, the sampled ids decode to the text, and a stream's ids add up to the unary answer's (greedy)."""

from __future__ import annotations

import anthropic
import pytest

from scaleout_common.models import load_tokenizer, resolve_model

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "user", "content": "Name three colours."}]
PROMPT = "The capital of France is"
IDS = {"return_token_ids": True}
ASK = {"max_tokens": 6, "temperature": 0, "extra_body": IDS}


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(resolve_model(None))


def test_chat_unary_and_streamed(client, model_id, tokenizer):
    answer = client.chat.completions.create(model=model_id, messages=MESSAGES, **ASK)
    prompt = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True)
    assert answer.prompt_token_ids == list(getattr(prompt, "input_ids", prompt))
    [choice] = answer.choices
    assert len(choice.token_ids) == answer.usage.completion_tokens
    assert tokenizer.decode(choice.token_ids, skip_special_tokens=True) == choice.message.content

    chunks = list(client.chat.completions.create(model=model_id, messages=MESSAGES, stream=True, **ASK))
    assert chunks[0].prompt_token_ids == answer.prompt_token_ids
    assert all(getattr(c, "prompt_token_ids", None) is None for c in chunks[1:])  # the first chunk only
    assert [t for c in chunks for ch in c.choices for t in ch.token_ids] == choice.token_ids

    plain = client.chat.completions.create(model=model_id, messages=MESSAGES, max_tokens=1).model_dump()
    unasked = {"prompt_token_ids": None, "prompt_logprobs": None}  # printed null, as vLLM's response model
    assert {name: plain[name] for name in unasked} == unasked and plain["choices"][0]["token_ids"] is None


def test_completions_unary_and_streamed_with_two_prompts(client, model_id, tokenizer):
    prompts = [PROMPT, "One, two,"]
    answer = client.completions.create(model=model_id, prompt=prompts, **ASK)
    for choice in answer.choices:
        assert choice.prompt_token_ids == tokenizer(prompts[choice.index]).input_ids
        assert tokenizer.decode(choice.token_ids, skip_special_tokens=True) == choice.text
    assert sum(len(c.token_ids) for c in answer.choices) == answer.usage.completion_tokens

    streamed: dict[int, list[int]] = {0: [], 1: []}
    prompt_ids: dict[int, list] = {0: [], 1: []}
    for chunk in client.completions.create(model=model_id, prompt=prompts, stream=True, **ASK):
        for choice in chunk.choices:
            streamed[choice.index] += choice.token_ids
            if getattr(choice, "prompt_token_ids", None) is not None:
                prompt_ids[choice.index].append(choice.prompt_token_ids)
    for choice in answer.choices:
        assert streamed[choice.index] == choice.token_ids
        assert prompt_ids[choice.index] == [choice.prompt_token_ids]  # on the choice's first chunk only

    plain = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=1).choices[0].model_dump()
    unasked = ("token_ids", "prompt_token_ids", "prompt_logprobs")  # printed null, as vLLM's response choice
    assert {name: plain[name] for name in unasked} == dict.fromkeys(unasked)

    # A stream holds text back while a stop string may be starting; the ids still arrive, and none after the
    # match (vLLM drops the tokens after the one completing the stop string).
    [free] = [c for c in answer.choices if c.index == 0]
    stop = free.text.strip()[3:6]
    assert stop, free.text
    chunks = list(client.completions.create(model=model_id, prompt=PROMPT, stop=[stop], stream=True, **ASK))
    ids = [t for c in chunks for ch in c.choices for t in ch.token_ids]
    assert ids == free.token_ids[: len(ids)] and len(ids) < len(free.token_ids)
    assert stop in tokenizer.decode(ids) and stop not in tokenizer.decode(ids[:-1])


def test_responses_carry_the_prompt_and_sampled_ids(client, model_id, tokenizer):
    asked = {"model": model_id, "input": MESSAGES[0]["content"], "temperature": 0, "max_output_tokens": 6}
    response = client.responses.create(**asked, extra_body=IDS)
    prompt = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True)
    assert response.prompt_token_ids == list(getattr(prompt, "input_ids", prompt))
    assert tokenizer.decode(response.token_ids, skip_special_tokens=True) == response.output_text
    events = list(client.responses.create(**asked, stream=True, extra_body=IDS))
    assert events[0].response.prompt_token_ids == response.prompt_token_ids
    assert events[-1].response.token_ids == response.token_ids


def test_anthropic_messages_carry_the_prompt_and_sampled_ids(stack, model_id, tokenizer):
    asked = {"model": model_id, "messages": MESSAGES, "max_tokens": 6, "extra_body": {"temperature": 0, **IDS}}
    with anthropic.Anthropic(base_url=stack.rest_url, api_key="unused", max_retries=0, timeout=120) as sdk:
        message = sdk.messages.create(**asked)
        events = list(sdk.messages.create(**asked, stream=True))
    prompt = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True)
    assert message.prompt_token_ids == list(getattr(prompt, "input_ids", prompt))
    assert tokenizer.decode(message.token_ids, skip_special_tokens=True) == message.content[0].text
    assert events[0].message.prompt_token_ids == message.prompt_token_ids
    [delta] = [e for e in events if e.type == "message_delta"]
    assert delta.token_ids == message.token_ids
