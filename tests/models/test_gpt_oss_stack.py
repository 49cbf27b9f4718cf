"""gpt-oss through the whole stack (render, engine, derender, the one-hop service, Envoy) with the official
`openai` SDK's Responses API: a tiny random-weight gpt-oss over the real o200k_harmony vocabulary, the published
chat template (tests/models/gpt_oss.py). Random weights give random text: what is checked is that every call
answers without an error, in the Responses shapes (the SDK's own models, strict), on the engine's paged fast path,
with the harmony parsers auto-detected from the template. A known harmony output run through derender checks
the parsers' split of reasoning, call and content exactly."""

from __future__ import annotations

import functools
import json

import pytest
from openai.types.responses import Response

from scaleout.v1 import common_pb2, derender_pb2, derender_pb2_grpc, engine_pb2, engine_pb2_grpc
from tests.clients.test_responses_sdk import WEATHER_TOOL, strict_events, strict_response
from tests.derender.calls import engine_messages
from tests.engine.o200k_harmony import NAMED, harmony_encoding
from tests.gateway.rest import post
from tests.models.conftest import served
from tests.models.gpt_oss import tiny_folder

pytestmark = pytest.mark.slow

NAME = "gpt-oss-tiny"
LENGTH = ["--max-model-len", "1024"]
ASKED = dict(model=NAME, input="What is the weather in Paris?", max_output_tokens=24, temperature=0)
# what gpt-oss writes after the generation prompt's `<|start|>assistant`: thinking, then a call that ends the turn
CALL_OUTPUT = (
    "<|channel|>analysis<|message|>The user wants the weather. Call get_weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city": "Paris"}<|call|>'
)
FINAL_OUTPUT = "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Paris.<|return|>"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    folder = tiny_folder(tmp_path_factory.mktemp("gpt-oss") / NAME)
    args = {"render": LENGTH, "engine": LENGTH}
    with served(folder, args, tmp_path_factory.mktemp("gpt-oss-stack-logs")) as running:
        yield running


@pytest.fixture(scope="module")
def encoding():
    """tiktoken's own o200k_harmony: the ids gpt-oss writes for a text, the text of a prompt's ids."""
    return harmony_encoding()


@pytest.fixture(scope="module")
def channel(stack):
    with stack.grpc_channel() as opened:
        yield opened


def test_the_engine_serves_it_on_the_paged_fast_path(channel):
    info = engine_pb2_grpc.EngineServiceStub(channel).GetModelInfo(engine_pb2.GetModelInfoRequest())
    assert info.backend == "paged" and info.vocab_size == 201088


def test_derender_parses_harmony_by_default(channel, encoding):
    """No parser named anywhere: the template's format picks harmony for reasoning and for calls."""
    stub = derender_pb2_grpc.DerenderServiceStub(channel)
    check = stub.CheckReasoning(derender_pb2.CheckReasoningRequest())
    harmony = functools.partial(encoding.encode, allowed_special="all")
    assert [list(tag.token_ids) for tag in check.tokens.end] == [harmony("<|channel|>final<|message|>")]
    tools = [common_pb2.Tool(type="function", function=common_pb2.FunctionDefinition(name="get_weather"))]
    context = derender_pb2.DerenderContext(id="chatcmpl-harmony", tools=tools, skip_special_tokens=True)

    def derender(text: str, stop: int):
        ids = harmony(text)
        assert ids[-1] == stop
        messages = engine_messages([ids[:5], ids[5:-1], [stop]], stop_token_id=stop)
        return stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages)).choices[0]

    called = derender(CALL_OUTPUT, NAMED["<|call|>"])
    assert called.message.reasoning_content == "The user wants the weather. Call get_weather."
    [call] = called.message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    assert called.finish_reason == "tool_calls" and not called.message.content
    answered = derender(FINAL_OUTPUT, NAMED["<|return|>"])
    assert (answered.message.reasoning_content, answered.message.content) == ("Easy.", "Paris.")
    assert answered.finish_reason == "stop" and not answered.message.tool_calls


def test_responses_input_renders_as_harmony_turns(stack, encoding):
    """Instructions, reasoning effort, a reasoning item, a call and its output, as the template writes them."""
    asked = {
        "model": NAME,
        "instructions": "Be brief.",
        "reasoning": {"effort": "high"},
        "tools": [WEATHER_TOOL],
        "store": False,
        "input": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "Tool."}],
            },
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
        ],
    }
    rendered = post(stack, "/v1/responses/render/typed", asked)
    assert rendered.status_code == 200, rendered.text
    prompt = encoding.decode([int(i) for i in rendered.json()["generate_request"]["token_ids"]])
    assert (
        "\nReasoning: high\n" in prompt
        and "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools" in prompt
    )
    assert prompt.endswith(
        "<|start|>user<|message|>Weather in Paris?<|end|>"
        "<|start|>assistant<|channel|>analysis<|message|>Tool.<|end|>"
        '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>'
        '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"18 C"<|end|><|start|>assistant'
    )


def test_responses_plain_and_streamed(client):
    response = strict_response(client.responses.create(**ASKED))
    assert response.status in ("completed", "incomplete") and response.error is None
    _well_formed(response)
    events = list(client.responses.create(**ASKED, stream=True))
    kinds = strict_events(events)
    assert kinds[:2] == ["response.created", "response.in_progress"] and "error" not in kinds
    assert kinds[-1] in ("response.completed", "response.incomplete")
    final = strict_response(events[-1].response)
    _well_formed(final)
    added, done = ([e.item.type for e in events if e.type == f"response.output_item.{k}"] for k in ("added", "done"))
    assert added == done == [item.type for item in final.output]


def test_responses_with_a_function_tool_and_its_output(client):
    asked = dict(ASKED, tools=[WEATHER_TOOL])
    response = strict_response(client.responses.create(**asked))
    _well_formed(response)
    events = list(client.responses.create(**asked, stream=True))
    strict_events(events)
    _well_formed(strict_response(events[-1].response))
    # a call and its output sent back render through the template's tool turns (`<|start|>functions.NAME to=...`)
    call = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}
    output = {"type": "function_call_output", "call_id": "call_1", "output": '{"temperature_c": 18}'}
    follow_up = [{"role": "user", "content": ASKED["input"]}, call, output]
    _well_formed(strict_response(client.responses.create(**dict(asked, input=follow_up))))


def _well_formed(response: Response) -> None:
    """Every output item complete of its kind; the usage adds up."""
    assert response.usage is not None and response.usage.output_tokens > 0
    for item in response.output:
        if item.type == "message":
            assert item.role == "assistant" and [part.type for part in item.content] == ["output_text"]
        elif item.type == "reasoning":
            assert all(part.type == "reasoning_text" for part in item.content or [])
        else:
            assert item.type == "function_call" and item.name == WEATHER_TOOL["name"] and item.call_id
    usage = response.usage
    assert usage.input_tokens > 0 and usage.total_tokens == usage.input_tokens + usage.output_tokens
