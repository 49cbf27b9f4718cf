"""vLLM's beam search (`use_beam_search`, `length_penalty`) through the official SDK on the real stack, as vLLM's own
test_completion `test_batch_completions` sends it: `n` beams a prompt, distinct, the same for the same prompt, best
first; on chat too; what beam search does not use is refused naming the field."""

from __future__ import annotations

import openai
import pytest

pytestmark = pytest.mark.slow

BEAM = {"use_beam_search": True}


def test_two_beams_a_prompt_are_distinct_and_the_same_for_the_same_prompt(client, model_id):
    for prompts in (["Hello, my name is"] * 2, [[0, 0, 0, 0, 0]] * 2):
        batch = client.completions.create(
            model=model_id, prompt=prompts, n=2, max_tokens=5, temperature=0.0, extra_body=BEAM
        )
        texts = [choice.text for choice in sorted(batch.choices, key=lambda c: c.index)]
        assert len(texts) == 4 and texts[0] != texts[1], "beam search should be different"
        assert texts[:2] == texts[2:], "two copies of the same prompt should be the same"
        assert all(c.finish_reason in ("length", "stop") for c in batch.choices)
        assert batch.usage is not None and batch.usage.completion_tokens <= 4 * 5


def test_the_best_beam_scores_at_least_the_greedy_answer(client, model_id):
    """Width 2 keeps the greedy path among its candidates: its best beam's mean logprob is the greedy one's or
    better (both 6 tokens, no EOS on the way: ignore_eos)."""
    prompt = "The capital of France is"
    greedy = client.completions.create(
        model=model_id, prompt=prompt, max_tokens=6, temperature=0, logprobs=0, extra_body={"ignore_eos": True}
    )
    beams = client.completions.create(
        model=model_id, prompt=prompt, n=2, max_tokens=6, extra_body={**BEAM, "ignore_eos": True}
    )
    best = beams.choices[0].text
    scored = client.completions.create(
        model=model_id, prompt=prompt + best, max_tokens=1, echo=True, logprobs=0, temperature=0
    )
    assert greedy.choices[0].logprobs is not None and scored.choices[0].logprobs is not None
    greedy_score = sum(greedy.choices[0].logprobs.token_logprobs)
    tail = scored.choices[0].logprobs.token_logprobs[-7:-1]  # the beam's 6 tokens, re-scored by the engine
    assert sum(tail) >= greedy_score - 1e-3


def test_chat_beams_and_what_beam_search_refuses(client, model_id):
    messages = [{"role": "user", "content": "Name a colour."}]
    chat = client.chat.completions.create(model=model_id, messages=messages, n=3, max_tokens=4, extra_body=BEAM)
    assert len(chat.choices) == 3 and len({c.message.content for c in chat.choices}) == 3
    for field, value in (("top_p", 0.5), ("stop", ["\n"]), ("logprobs", True), ("stream", True)):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model=model_id, messages=messages, max_tokens=2, extra_body={**BEAM, field: value}
            )
        assert isinstance(refused.value.body, dict) and refused.value.body["param"] == field
    with pytest.raises(openai.BadRequestError) as refused:  # it shapes beam search only
        client.completions.create(model=model_id, prompt="Hi", max_tokens=2, extra_body={"length_penalty": 0.5})
    assert isinstance(refused.value.body, dict) and refused.value.body["param"] == "length_penalty"
