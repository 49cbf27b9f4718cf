"""The routing key (GenerateRequest.prefix_hash): one per conversation, whatever its turn (bridged turns too);
salted; spread."""

from __future__ import annotations

import pytest

from render_svc import routing
from render_svc.bridge import bridge_chat
from render_svc.completion import render_completion
from scaleout.v1 import render_pb2
from scaleout_common import prefix_hash
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


@pytest.mark.parametrize("family", ["default", "llama3", "qwen3"])
def test_the_key_hashes_the_prompts_own_first_turn_from_its_one_tokenization(renderers, family):
    """The first turn's token count comes from the prompt's one tokenization, cut where the first user text ends
    (in two pieces at the special token there: the whole text's ids, and the count the offsets give)."""
    renderer = renderers[family]
    request = chat(_turns("What is 2+2?")[2], return_prompt_text=True)
    response = renderer.render_chat(request)
    text, ids = response.prompt_text, list(response.generate_request.token_ids)
    cut = routing.first_turn_end(renderer.prepare(request).messages, text)
    tokens = renderer.model.tokens
    assert cut is not None and text[:cut].endswith("What is 2+2?")
    # Llama 3's <|eot_id|> is plain text to this model's tokenizer: there the count comes from offsets
    assert tokens.hard_boundary(text, cut) == (family != "llama3")
    [(pieces, _, count)] = tokens.encode_cut([text], [cut], add_special_tokens=False, offsets=False)
    [(whole, _, counted)] = tokens.encode_cut([text], [cut], add_special_tokens=False, offsets=True)
    assert pieces == whole == ids and count == counted
    # the tokens that end by the cut: with llama3, "?" starts a token that runs on into "<|eot_id|>"
    head, past = (tokens.decode(ids[:n], skip_special_tokens=False) for n in (count, count + 1))
    assert text.startswith(past) and len(head) <= cut < len(past)
    assert response.generate_request.prefix_hash == prefix_hash.prefix_key("", ids[:count], routing.BLOCK_SIZE)


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
