"""What the frameworks users run on top of the OpenAI SDK sent and the gateway refused, each request rebuilt with the
official `openai` SDK (so CI needs no framework). The sweep and its findings: docs/clients.md.

- instructor's RESPONSES_TOOLS mode (instructor 1.17) sends `text.format` json_schema *and* a forced function
  `tool_choice` naming the same model; its chat TOOLS mode can meet a `response_format` beside `tool_choice:
  required` as well. OpenAI (and vLLM) take both: the forced output is calls only, so the answer format has no
  text to shape. It was refused with CONFLICTING_OPTIONS; Anthropic's `output_config.format` beside a forced
  `tool_choice` (langchain-anthropic's and instructor's forced tools with a format) was too.
"""

from __future__ import annotations

import json

import anthropic
import jsonschema
import pytest

pytestmark = pytest.mark.slow

PERSON = {
    "type": "object",
    "properties": {"name": {"title": "Name", "type": "string"}, "age": {"title": "Age", "type": "integer"}},
    "required": ["name", "age"],
    "title": "Person",
    "additionalProperties": False,
}
# instructor's request, verbatim but for the model
INSTRUCTOR_RESPONSES_TOOLS = {
    "input": [{"role": "user", "content": "Alice is 30."}],
    "max_output_tokens": 64,
    "temperature": 0,
    "text": {"format": {"type": "json_schema", "name": "Person", "strict": True, "schema": PERSON}},
    "tool_choice": {"type": "function", "name": "Person"},
    "tools": [
        {
            "type": "function",
            "name": "Person",
            "parameters": PERSON,
            "description": "Correctly extracted `Person` with all the required parameters with correct types",
        }
    ],
}


def test_instructor_responses_tools_gets_its_forced_call(client, model_id):
    response = client.responses.create(model=model_id, **INSTRUCTOR_RESPONSES_TOOLS)
    assert response.status == "completed"
    (call,) = response.output
    assert call.type == "function_call" and call.name == "Person"
    jsonschema.validate(json.loads(call.arguments), PERSON)
    assert response.text.format.type == "json_schema"  # echoed as given


def test_instructor_responses_tools_streamed(client, model_id):
    """create_partial's form: the same request with stream=True; the call's arguments arrive as deltas."""
    events = list(client.responses.create(model=model_id, stream=True, **INSTRUCTOR_RESPONSES_TOOLS))
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    (done,) = [e for e in events if e.type == "response.completed"]
    (call,) = done.response.output
    assert call.type == "function_call" and json.loads(deltas) == json.loads(call.arguments)
    jsonschema.validate(json.loads(call.arguments), PERSON)


def test_a_response_format_beside_a_required_tool_choice(client, model_id):
    answer = client.chat.completions.create(
        model=model_id,
        messages=[{"role": "user", "content": "Alice is 30."}],
        tools=[{"type": "function", "function": {"name": "Person", "parameters": PERSON}}],
        tool_choice="required",
        response_format={"type": "json_schema", "json_schema": {"name": "Person", "schema": PERSON, "strict": True}},
        max_tokens=64,
        temperature=0,
    )
    (choice,) = answer.choices
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.function.name == "Person"
    jsonschema.validate(json.loads(call.function.arguments), PERSON)


def test_an_output_format_beside_a_forced_anthropic_tool(stack, model_id):
    with anthropic.Anthropic(base_url=stack.rest_url, api_key="unused", max_retries=0, timeout=120) as claude:
        message = claude.messages.create(
            model=model_id,
            max_tokens=64,
            messages=[{"role": "user", "content": "Alice is 30."}],
            tools=[{"name": "Person", "input_schema": PERSON}],
            tool_choice={"type": "tool", "name": "Person"},
            extra_body={"output_config": {"format": {"type": "json_schema", "schema": PERSON}}, "temperature": 0},
        )
    assert message.stop_reason == "tool_use"
    (block,) = message.content
    assert block.type == "tool_use" and block.name == "Person"
    jsonschema.validate(block.input, PERSON)
