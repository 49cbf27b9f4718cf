"""vLLM's decode-side token reuse over real gRPC: a chat's `prompt_token_ids` (a P/D decode step's, forwarded from
its prefill step) are the prompt in place of the rendered messages, checked as a token-id prompt is."""

from __future__ import annotations

from tests.render.calls import chat, expect

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


async def test_the_forwarded_ids_are_the_prompt_and_the_text_they_mean(stub, reference_tokenizer):
    rendered = await stub.RenderChat(chat(MESSAGES, return_prompt_text=True))
    ids = list(rendered.generate_request.token_ids)
    reused = await stub.RenderChat(
        chat([{"role": "user", "content": "other"}], prompt_token_ids=ids, return_prompt_text=True, n=2)
    )
    assert list(reused.generate_request.token_ids) == ids and reused.generate_request.n == 2
    assert reused.prompt_text == rendered.prompt_text == reference_tokenizer.decode(ids)
    assert list(reused.derender_context.prompt_tail_token_ids) == ids[-8:]


async def test_ids_outside_the_vocabulary_or_the_model_length_are_refused(stub):
    error = await expect(
        stub.RenderChat(chat(MESSAGES, prompt_token_ids=[1, 10**6])), "INVALID_ARGUMENT", "TOKEN_ID_OUT_OF_VOCAB"
    )
    assert error.violations[0][0] == "prompt_token_ids[1]"
    await expect(stub.RenderChat(chat(MESSAGES, prompt_token_ids=[1] * 9000)), "OUT_OF_RANGE", "PROMPT_TOO_LONG")
    await expect(
        stub.RenderChat(chat(MESSAGES, prompt_token_ids=[1, 2], return_token_offsets=True)),
        "INVALID_ARGUMENT",
        "CONFLICTING_OPTIONS",
    )
