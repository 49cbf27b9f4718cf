"""Responses' `reasoning.summary` on a model that reasons, through the official `openai` SDK: this stack's derender
reads `<think>` blocks, and the input's unfinished assistant turn opens one (continued, as vLLM continues an
`in_progress` item), so the model writes reasoning. With summary "auto" the reasoning item carries it twice: its
`content` (today's `reasoning_text`) and its `summary` (one `summary_text` part, the reasoning whole), unary and
streamed in OpenAI's event order; the Agents SDK sends that item back on its next turn, which renders as before."""

from __future__ import annotations

import pytest

from tests.clients.test_responses_sdk import strict_events, strict_response
from tests.pipeline.test_api_shapes import summarized_reasoning_events

pytestmark = pytest.mark.slow

THINKING = [
    {"role": "user", "content": "Why is the sky blue? Think first."},
    {"role": "assistant", "content": "<think>\nThe sky looks blue because", "status": "in_progress"},
]
ASKED = {"input": THINKING, "temperature": 0, "max_output_tokens": 24, "reasoning": {"summary": "auto"}, "store": False}


def _reasoning(response):
    item = response.output[0]
    assert item.type == "reasoning"
    return item


def test_the_summary_is_the_reasoning_whole(client, model_id):
    response = client.responses.create(model=model_id, **ASKED)
    strict_response(response)
    item = _reasoning(response)
    (content,) = item.content
    assert content.type == "reasoning_text" and content.text.strip()
    assert [(part.type, part.text) for part in item.summary] == [("summary_text", content.text)]
    assert response.reasoning.summary == "auto"
    plain = client.responses.create(model=model_id, **{**ASKED, "reasoning": None})
    assert _reasoning(plain).summary == [] and _reasoning(plain).content[0].text == content.text
    # the next turn, as the Agents SDK sends it: the reasoning item back with its summary and content
    follow = client.responses.create(
        model=model_id,
        input=[*THINKING[:1], item.model_dump(exclude_none=True), {"role": "user", "content": "Say it shorter."}],
        max_output_tokens=4,
        store=False,
    )
    assert follow.status in ("completed", "incomplete")


def test_the_summary_streams_in_openais_order(client, model_id):
    unary = client.responses.create(model=model_id, **ASKED)
    events = list(client.responses.create(model=model_id, stream=True, **ASKED))
    strict_events(events)
    kinds = [e.type for e in events if getattr(e, "output_index", None) == 0]
    deltas = kinds.count("response.reasoning_text.delta")
    assert deltas > 1 and kinds == summarized_reasoning_events(deltas)
    summary = [e for e in events if e.type == "response.reasoning_summary_text.delta"]
    text = _reasoning(unary).summary[0].text
    assert "".join(e.delta for e in summary) == text
    final = strict_response(events[-1].response)
    assert {(e.item_id, e.summary_index) for e in summary} == {(final.output[0].id, 0)}
    (done,) = [e for e in events if e.type == "response.reasoning_summary_part.done"]
    assert (done.part.type, done.part.text) == ("summary_text", text)
    assert final.output[0].summary == _reasoning(unary).summary
