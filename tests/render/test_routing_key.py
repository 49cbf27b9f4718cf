"""The routing key (GenerateRequest.prefix_hash): one per conversation, whatever its turn (bridged turns too);
salted; spread."""

from __future__ import annotations

import pytest

from render_svc.bridge import bridge_chat
from render_svc.completion import render_completion
from scaleout.v1 import render_pb2
from tests.render.calls import chat

SYSTEM = {"role": "system", "content": "You are a careful assistant. " * 20}


def _turns(first_question: str) -> list[list[dict]]:
    history = [SYSTEM, {"role": "user", "content": first_question}]
    turns = [list(history)]
    for i in range(3):
        history += [{"role": "assistant", "content": f"Answer {i}."}, {"role": "user", "content": f"Then {i}?"}]
        turns.append(list(history))
    return turns


@pytest.mark.parametrize("family", ["default", "llama3", "qwen3"])
def test_every_turn_of_a_conversation_has_its_first_turns_key(renderers, family):
    renderer = renderers[family]
    keys = [renderer.render_chat(chat(m)).generate_request.prefix_hash for m in _turns("What is 2+2?")]
    other = [renderer.render_chat(chat(m)).generate_request.prefix_hash for m in _turns("Name a colour.")]
    assert len(set(keys)) == 1 and len(set(other)) == 1 and keys[0] != other[0]
    assert len(keys[0]) == 32  # 128-bit hex


def test_the_salt_changes_the_key_and_batch_render_gives_the_same_keys(renderers):
    renderer = renderers["default"]
    messages = _turns("What is 2+2?")[0]
    plain = renderer.render_chat(chat(messages)).generate_request.prefix_hash
    salted = renderer.render_chat(chat(messages, cache_salt="tenant-a")).generate_request.prefix_hash
    batch = renderer.render_chat_batch(
        render_pb2.RenderChatBatchRequest(requests=[chat(messages), chat(messages, cache_salt="tenant-a")])
    )
    assert plain != salted
    assert [r.generate_request.prefix_hash for r in batch.responses] == [plain, salted]


def test_a_prompt_cache_key_routes_its_requests_together(renderers):
    """OpenAI's prompt_cache_key: the caller's own grouping replaces the prompt's key (salted as it is)."""
    renderer = renderers["default"]

    def key(question: str, **fields) -> str:
        return renderer.render_chat(chat(_turns(question)[0], **fields)).generate_request.prefix_hash

    grouped = {key(q, prompt_cache_key="user-42") for q in ("What is 2+2?", "Name a colour.")}
    assert len(grouped) == 1 and len(grouped.pop()) == 32
    assert key("What is 2+2?", prompt_cache_key="user-42") != key("What is 2+2?", prompt_cache_key="user-43")
    assert key("What is 2+2?", prompt_cache_key="user-42") != key(
        "What is 2+2?", prompt_cache_key="user-42", cache_salt="tenant-a"
    )


def test_completions_key_on_their_first_tokens(renderers):
    renderer = renderers["default"]
    header = "Q: 1+1? A: 2. " * 60  # longer than COMPLETION_PREFIX_TOKENS

    def key(prompt: str) -> str:
        request = render_pb2.RenderCompletionRequest(prompts=[prompt])
        return render_completion(renderer, request).prompts[0].generate_request.prefix_hash

    assert key(header + "Q: 2+2?") == key(header + "Q: 3+3?")
    assert key("Q: 2+2?") != key("Q: 3+3?")


def test_bridged_turns_keep_the_key_they_are_given_or_key_their_ids_as_a_completion(renderers):
    renderer = renderers["default"]
    first = renderer.render_chat(chat(_turns("What is 2+2?")[0])).generate_request
    answer = renderer.model.tokens.encode(["Four."], add_special_tokens=False)[0]

    def bridge(previous, prefix_hash="", cache_salt=""):
        request = render_pb2.BridgeChatRequest(
            previous_prompt_token_ids=previous.token_ids,
            completion_token_ids=answer,
            request=chat([{"role": "user", "content": "And 3+3?"}], cache_salt=cache_salt),
            prefix_hash=prefix_hash,
        )
        return bridge_chat(renderer, request).generate_request

    second = bridge(first, first.prefix_hash)
    third = bridge(second, second.prefix_hash)
    assert first.prefix_hash == second.prefix_hash == third.prefix_hash
    unkeyed = bridge(first)
    completion = render_completion(
        renderer, render_pb2.RenderCompletionRequest(prompt_token_ids=[{"token_ids": first.token_ids}])
    )
    assert unkeyed.prefix_hash == completion.prompts[0].generate_request.prefix_hash
    assert bridge(first, cache_salt="tenant-a").prefix_hash not in (unkeyed.prefix_hash, "")
