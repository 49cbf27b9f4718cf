"""What the gateway adds to Anthropic's Messages API, through the official `anthropic` SDK: every answer names its
request (`request-id`, and `request_id` in error bodies) and the SDKs' beta form of the route (`?beta=true`, which
the TypeScript SDK's beta.messages and Claude Code always use) is the same route."""

from __future__ import annotations

import anthropic
import pytest

from tests.gateway.rest import post

pytestmark = pytest.mark.slow

PARIS = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def claude(stack):
    with anthropic.Anthropic(base_url=stack.rest_url, api_key="unused", max_retries=0, timeout=120) as sdk:
        yield sdk


def test_every_answer_names_its_request(claude, model_id):
    raw = claude.messages.with_raw_response.create(model=model_id, max_tokens=4, messages=PARIS)
    assert raw.headers["request-id"] and raw.parse()._request_id == raw.headers["request-id"]
    with claude.messages.with_streaming_response.create(
        model=model_id, max_tokens=4, messages=PARIS, stream=True
    ) as streamed:
        assert streamed.headers["request-id"] not in ("", raw.headers["request-id"])
    with pytest.raises(anthropic.NotFoundError) as caught:
        claude.messages.create(model="no-such-model", max_tokens=4, messages=PARIS)
    error = caught.value
    assert error.request_id and error.request_id == error.response.headers["request-id"]
    assert error.body["request_id"] == error.request_id and error.body["error"]["type"] == "not_found_error"


def test_the_beta_route_is_the_same_route(claude, stack, model_id):
    raw = post(stack, "/v1/messages?beta=true", {"model": model_id, "max_tokens": 2, "messages": PARIS})
    assert raw.status_code == 200 and raw.json()["type"] == "message", raw.text
    assert (
        post(stack, "/v1/messages?other=1", {"model": model_id, "max_tokens": 2, "messages": PARIS}).status_code == 404
    )
    request = dict(model=model_id, max_tokens=8, messages=PARIS, extra_body={"temperature": 0})
    beta = claude.beta.messages.create(**request)
    assert beta.content[0].text == claude.messages.create(**request).content[0].text
    with claude.beta.messages.stream(**request) as stream:
        assert stream.get_final_message().content[0].text == beta.content[0].text


def test_count_tokens_counts_the_prompt_messages_renders(claude, model_id):
    system = "You are terse."
    counted = claude.messages.count_tokens(model=model_id, system=system, messages=PARIS)
    answer = claude.messages.create(model=model_id, max_tokens=2, system=system, messages=PARIS)
    usage = answer.usage
    assert counted.input_tokens == usage.input_tokens + (usage.cache_read_input_tokens or 0) > 0
    assert claude.beta.messages.count_tokens(model=model_id, system=system, messages=PARIS).input_tokens == (
        counted.input_tokens
    )
    options = dict(cache_control={"type": "ephemeral"}, speed="standard", output_config={"effort": "low"})
    assert claude.messages.count_tokens(model=model_id, system=system, messages=PARIS, **options).input_tokens == (
        counted.input_tokens  # the SDK's other count_tokens fields, which do not change SmolLM2's prompt
    )
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.count_tokens(model=model_id, messages=PARIS, extra_body={"max_tokens": 8})
    assert caught.value.body["error"]["param"] == "max_tokens"


def test_too_many_stop_sequences_name_the_field_the_client_sent(claude, model_id):
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model=model_id, max_tokens=2, messages=PARIS, stop_sequences=["a"] * 17)
    assert caught.value.body["error"]["param"] == "stop_sequences"


def test_models_list_in_anthropics_shape_too(claude, model_id):
    page = claude.models.list(limit=20)
    assert [m.id for m in page.data] and page.data[0].id == model_id
    assert page.has_more is False and (page.first_id, page.last_id) == (page.data[0].id, page.data[-1].id)
    card = claude.models.retrieve(model_id)
    assert (card.type, card.id, card.display_name) == ("model", model_id, model_id) and card.created_at.year >= 2024
    assert claude.models.list(after_id=page.last_id).data == []
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.models.list(after_id="no-such-model")
    assert caught.value.body["error"]["param"] == "after_id"
