"""The official `openai` Python SDK's Responses API against the gateway (`base_url=.../v1`): `responses.create`
unary and with `stream=True`, with text and with a function tool round trip (the SDK's own output items sent
back with a `function_call_output`). Every Response and every stream event is validated with the SDK's own
pydantic models in strict mode. Greedy (`temperature=0`): streamed and unary answers are the same."""

from __future__ import annotations

import json

import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import BaseModel, TypeAdapter

pytestmark = pytest.mark.slow

QUESTION = "What is the capital of France?"
# SmolLM2's template does not render `tools`: the instructions and one worked turn teach it the hermes format the
# stack's default tool parser reads; greedy, it then calls the function.
INSTRUCTIONS = (
    "You can call the function get_weather. To call it, answer with exactly "
    '<tool_call>{"name": "get_weather", "arguments": {"city": "<city>"}}</tool_call> and nothing else.'
)
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
WEATHER = [
    {"role": "user", "content": "What is the weather in Rome?"},
    {"role": "assistant", "content": '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>'},
    {"role": "user", "content": "What is the weather in Paris?"},
]
STREAM_EVENT = TypeAdapter(ResponseStreamEvent)


def strict_response(response: BaseModel) -> Response:
    return Response.model_validate(response.model_dump(by_alias=True), strict=True)


def strict_events(events: list) -> list[str]:
    for number, event in enumerate(events):
        STREAM_EVENT.validate_python(event.model_dump(), strict=True)
        assert event.sequence_number == number
    return [event.type for event in events]


def test_create_text(client, model_id):
    response = client.responses.create(model=model_id, input=QUESTION, temperature=0, max_output_tokens=32)
    strict_response(response)
    assert response.id.startswith("resp_") and response.status == "completed" and response.model == model_id
    assert "Paris" in response.output_text
    assert [item.type for item in response.output] == ["message"]
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.temperature == 0 and response.max_output_tokens == 32 and response.store is True
    assert response.max_tool_calls is None


def test_output_text_logprobs_unary_and_streamed(client, model_id):
    """What the Agents SDK sends for `ModelSettings(top_logprobs=2)`: the output_text's tokens with their
    logprobs and 2 alternatives each, spelling its text; the stream's deltas carry the same entries."""
    asked = dict(
        model=model_id,
        input=QUESTION,
        temperature=0,
        max_output_tokens=8,
        include=["message.output_text.logprobs"],
        top_logprobs=2,
    )
    response = client.responses.create(**asked)
    part = response.output[0].content[0]
    assert part.logprobs and "".join(entry.token for entry in part.logprobs) == part.text
    assert all(len(entry.top_logprobs) == 2 and entry.logprob <= 0 for entry in part.logprobs)
    assert response.top_logprobs == 2
    events = list(client.responses.create(**asked, stream=True))
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    streamed = [entry for e in deltas for entry in e.logprobs]
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in part.logprobs]
    done = next(e for e in events if e.type == "response.output_text.done")
    assert len(done.logprobs) == len(part.logprobs)


def test_max_tool_calls_caps_hosted_tools_so_it_holds(client, model_id):
    """It counts hosted (built-in) tool calls, and hosted tools are refused here: accepted and echoed."""
    response = client.responses.create(
        model=model_id, input=QUESTION, temperature=0, max_output_tokens=8, max_tool_calls=2
    )
    assert response.max_tool_calls == 2 and response.output_text


def test_instructions_and_an_incomplete_answer(client, model_id):
    response = client.responses.create(
        model=model_id, instructions="Answer in one word.", input=QUESTION, temperature=0, max_output_tokens=2
    )
    strict_response(response)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert response.instructions == "Answer in one word." and response.usage.output_tokens == 2
    assert [item.status for item in response.output] == ["incomplete"]  # the item cut short, as OpenAI marks it


def test_stream_marks_the_item_cut_short_incomplete(client, model_id):
    """An item a max_output_tokens cut ends is `incomplete` in its `output_item.done` and in the final Response
    (the Agents SDK and litellm read item status; found with the OpenAI Agents SDK)."""
    events = list(
        client.responses.create(model=model_id, input=QUESTION, temperature=0, max_output_tokens=2, stream=True)
    )
    kinds = strict_events(events)
    assert kinds[-1] == "response.incomplete"
    (done,) = [event for event in events if event.type == "response.output_item.done"]
    assert done.item.status == "incomplete"
    assert [item.status for item in events[-1].response.output] == ["incomplete"]


def test_stream_text(client, model_id):
    unary = client.responses.create(model=model_id, input=QUESTION, temperature=0, max_output_tokens=32)
    events = list(
        client.responses.create(model=model_id, input=QUESTION, temperature=0, max_output_tokens=32, stream=True)
    )
    kinds = strict_events(events)
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == unary.output_text
    final = strict_response(events[-1].response)
    assert final.output_text == unary.output_text and final.usage.output_tokens == unary.usage.output_tokens
    assert {e.item_id for e in events if e.type == "response.output_text.delta"} == {final.output[0].id}


def test_function_tool_round_trip(client, model_id):
    asked = dict(model=model_id, instructions=INSTRUCTIONS, tools=[WEATHER_TOOL], temperature=0, max_output_tokens=64)
    response = client.responses.create(input=WEATHER, **asked)
    strict_response(response)
    [call] = [item for item in response.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"} and call.call_id
    # As the SDK's docs do it: the response's own output items go back, followed by the function's output.
    follow_up = [
        *WEATHER,
        *response.output,
        {"type": "function_call_output", "call_id": call.call_id, "output": '{"temperature_c": 18}'},
    ]
    answer = client.responses.create(input=follow_up, **asked)
    strict_response(answer)
    assert answer.status == "completed" and answer.output
    # The same round trip streamed ends with the same Response.
    events = list(client.responses.create(input=follow_up, stream=True, **asked))
    strict_events(events)
    final = strict_response(events[-1].response)
    assert events[-1].type == "response.completed"
    assert [item.model_dump(exclude={"id", "call_id"}) for item in final.output] == [
        item.model_dump(exclude={"id", "call_id"}) for item in answer.output
    ]


def test_stream_function_call(client, model_id):
    asked = dict(model=model_id, instructions=INSTRUCTIONS, tools=[WEATHER_TOOL], temperature=0, max_output_tokens=64)
    unary = client.responses.create(input=WEATHER, **asked)
    events = list(client.responses.create(input=WEATHER, stream=True, **asked))
    kinds = strict_events(events)
    assert "response.function_call_arguments.delta" in kinds and kinds[-1] == "response.completed"
    added = next(e for e in events if e.type == "response.output_item.added")
    assert added.item.type == "function_call" and added.item.name == "get_weather"
    arguments = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert json.loads(arguments) == json.loads(done.arguments) == {"city": "Paris"}
    final = strict_response(events[-1].response)
    [call] = final.output
    [unary_call] = unary.output
    assert (call.type, call.name, call.arguments) == ("function_call", "get_weather", unary_call.arguments)
    assert call.call_id == added.item.call_id


def test_what_is_not_kept_is_refused(client, model_id):
    """Stored responses are tests/two_pipelines' (store, retrieve, previous_response_id): here what is refused."""
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model=model_id, input=QUESTION, previous_response_id="resp_123")
    assert caught.value.code == "RESPONSE_NOT_FOUND" and caught.value.param == "previous_response_id"
    with pytest.raises(openai.BadRequestError) as caught:  # an id of another form: 400, as OpenAI (SGLang's test)
        client.responses.create(model=model_id, input=QUESTION, previous_response_id="bad")
    assert caught.value.code == "INVALID_REQUEST" and caught.value.param == "previous_response_id"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=model_id, input=QUESTION, conversation="conv_123")
    assert caught.value.code == "UNSUPPORTED_FIELD" and caught.value.param == "conversation"
    image = {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "auto"}
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=model_id, input=[{"role": "user", "content": [image]}])
    assert caught.value.code == "INVALID_CONTENT" and caught.value.param == "input[0].content[0]"
    # the Vercel AI SDK's second turn unless store is false: the error says what to send instead
    reference = {"type": "item_reference", "id": "msg_123"}
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=model_id, input=[{"role": "user", "content": "Hi"}, reference])
    assert caught.value.code == "UNSUPPORTED_FIELD" and caught.value.param == "input[1]"
    assert "send the item itself" in caught.value.message and "store: false" in caught.value.message


def test_render_route(client, model_id):
    rendered = client.post("/responses/render/typed", cast_to=object, body={"model": model_id, "input": QUESTION})
    chat = client.post(
        "/chat/completions/render/typed",
        cast_to=object,
        body={"model": model_id, "messages": [{"role": "user", "content": QUESTION}]},
    )
    assert rendered["generate_request"]["token_ids"] == chat["generate_request"]["token_ids"]
    assert rendered["derender_context"]["id"].startswith("resp_")


def test_stream_helper_accumulates_the_same_response(client, model_id):
    """`responses.stream()` folds the events itself and parses a strict function's arguments."""
    strict_tool = {**WEATHER_TOOL, "strict": True}
    asked = dict(model=model_id, instructions=INSTRUCTIONS, tools=[strict_tool], temperature=0, max_output_tokens=64)
    unary = client.responses.create(input=WEATHER, **asked)
    with client.responses.stream(input=WEATHER, **asked) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    [call] = final.output
    assert call.type == "function_call" and call.parsed_arguments == json.loads(unary.output[0].arguments)


def test_a_forced_function_is_called_without_any_prompting(client, model_id):
    """tool_choice required / a named function is enforced by the engine's grammar."""
    for choice in ("required", {"type": "function", "name": "get_weather"}):
        response = client.responses.create(
            model=model_id,
            input="Hello there!",
            tools=[WEATHER_TOOL],
            tool_choice=choice,
            temperature=0,
            max_output_tokens=64,
        )
        strict_response(response)
        [call] = [item for item in response.output if item.type == "function_call"]
        assert call.name == "get_weather" and call.arguments.startswith('{"city":'), (choice, call.arguments)
        if call.status == "incomplete":  # the tiny model may loop inside the string until max_output_tokens
            assert response.incomplete_details and response.incomplete_details.reason == "max_output_tokens"
        else:
            assert isinstance(json.loads(call.arguments).get("city"), str), (choice, call.arguments)


def test_text_format_json_schema_is_enforced(client, model_id):
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"],
        "additionalProperties": False,
    }
    response = client.responses.create(
        model=model_id,
        input="Name a big city and its population.",
        text={"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": True}},
        temperature=0,
        max_output_tokens=64,
    )
    strict_response(response)
    if response.status == "completed":
        answer = json.loads(response.output_text)
        assert set(answer) == {"city", "population"} and isinstance(answer["population"], int)
