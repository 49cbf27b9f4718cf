"""Two fields the framework sweep found refused (docs/clients.md), through the official `openai` SDK and the real
stack: `prompt_cache_retention` on Chat Completions and Responses ("in_memory" is what the engine's prefix cache is:
the repeated prompt is served from it; "24h" refused naming the field) and Responses' `reasoning.summary` ("auto"
and "detailed" honoured, "concise" refused). The default stack has no reasoning parser, so a response has no
reasoning item to summarize; tests/two_pipelines/test_reasoning_summary.py has one that reasons."""

from __future__ import annotations

import openai
import pytest

from tests.clients.test_responses_sdk import QUESTION, strict_events, strict_response

pytestmark = pytest.mark.slow

# Long enough to fill whole KV blocks, so a repeat of it is served from the prefix cache.
LONG_QUESTION = "Name the capital city of France, and say in one short sentence why it became the capital. " * 3


def _refused(caught, param: str, code: str = "UNSUPPORTED_FIELD") -> None:
    assert (caught.value.code, caught.value.param) == (code, param)
    assert param in caught.value.message


def test_chat_prompt_cache_retention_in_memory_is_the_prefix_cache(client, model_id):
    asked = dict(model=model_id, messages=[{"role": "user", "content": LONG_QUESTION}], max_tokens=2, temperature=0)
    client.chat.completions.create(**asked)
    again = client.chat.completions.create(**asked, prompt_cache_retention="in_memory")
    assert again.choices[0].finish_reason in ("stop", "length")
    assert again.usage.prompt_tokens_details.cached_tokens > 0  # the first call's prefix, kept in memory
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**asked, prompt_cache_retention="24h")
    _refused(caught, "prompt_cache_retention")
    assert "in_memory" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**asked, extra_body={"prompt_cache_retention": "1h"})
    _refused(caught, "prompt_cache_retention", "INVALID_REQUEST")
    assert client.chat.completions.create(**asked, extra_body={"prompt_cache_retention": None}).choices


def test_responses_prompt_cache_retention_unary_and_streamed(client, model_id):
    asked = dict(model=model_id, input=LONG_QUESTION, max_output_tokens=4, temperature=0)
    client.responses.create(**asked)
    response = client.responses.create(**asked, prompt_cache_retention="in_memory")
    strict_response(response)
    assert response.prompt_cache_retention == "in_memory"  # echoed, as OpenAI's Response does
    assert response.usage.input_tokens_details.cached_tokens > 0
    assert client.responses.create(**asked).prompt_cache_retention is None
    events = list(client.responses.create(**asked, prompt_cache_retention="in_memory", stream=True))
    strict_events(events)
    assert events[0].response.prompt_cache_retention == "in_memory"
    assert events[-1].response.prompt_cache_retention == "in_memory"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(**asked, prompt_cache_retention="24h")
    _refused(caught, "prompt_cache_retention")
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(**asked, prompt_cache_retention="24h", stream=True)
    _refused(caught, "prompt_cache_retention")


def test_reasoning_summary_without_reasoning_is_no_item(client, model_id):
    """What the Agents SDK's examples send (`Reasoning(summary="auto")`): accepted and echoed; a model that does not
    reason writes no reasoning item, as OpenAI answers a response without reasoning."""
    asked = dict(model=model_id, input=QUESTION, max_output_tokens=16, temperature=0)
    for summary in ("auto", "detailed"):
        response = client.responses.create(**asked, reasoning={"effort": "low", "summary": summary})
        strict_response(response)
        assert [item.type for item in response.output] == ["message"]
        assert response.reasoning.summary == summary
    events = list(client.responses.create(**asked, reasoning={"summary": "auto"}, stream=True))
    kinds = strict_events(events)
    assert not any("reasoning" in kind for kind in kinds)
    assert events[-1].response.reasoning.summary == "auto"


def test_reasoning_summary_concise_is_refused(client, model_id):
    asked = dict(model=model_id, input=QUESTION, max_output_tokens=4)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(**asked, reasoning={"summary": "concise"})
    _refused(caught, "reasoning.summary")
    assert "concise" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(**asked, reasoning={"generate_summary": "concise"})
    _refused(caught, "reasoning.generate_summary")
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(**asked, extra_body={"reasoning": {"summary": "short"}})
    _refused(caught, "reasoning.summary", "INVALID_REQUEST")
