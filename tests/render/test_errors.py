"""Every limit and malformed input gets INVALID_ARGUMENT / OUT_OF_RANGE / FAILED_PRECONDITION (or NOT_FOUND for an
unknown model) with its stable ErrorInfo reason, over real gRPC."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf import json_format

from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason as r
from tests.render.calls import chat, expect
from tests.render.conftest import render_server

BAD = "INVALID_ARGUMENT"
RANGE = "OUT_OF_RANGE"
PRECONDITION = "FAILED_PRECONDITION"

NESTED_LOOPS = "{% set x = range(100000) | list %}{% for a in x %}{% for b in x %}{% endfor %}{% endfor %}"
HUGE_OUTPUT = "{% for i in range(100000) %}{{ messages[0]['content'] }}{% endfor %}"
FORGETS_ASSISTANT = (
    "{% for m in messages %}<{{ m.role }}>{% if m.role != 'assistant' or loop.last %}{{ m.content }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
)

CHAT_CASES = {
    "missing messages": (chat([]), BAD, r.MISSING_MESSAGES),
    "invalid role": (chat([{"role": "wiz ard", "content": "x"}]), BAD, r.INVALID_ROLE),
    "number content": (chat([{"role": "user", "content": 5}]), BAD, r.INVALID_CONTENT),
    "image part": (
        chat([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
        BAD,
        r.INVALID_CONTENT,
    ),
    "nameless tool": (chat(tools=[{"type": "function", "function": {"description": "x"}}]), BAD, r.INVALID_TOOL),
    "part type a list": (
        chat([{"role": "user", "content": [{"type": ["text"], "text": "x"}]}]),
        BAD,
        r.INVALID_CONTENT,
    ),
    "part type an object": (chat([{"role": "user", "content": [{"type": {}, "text": "x"}]}]), BAD, r.INVALID_CONTENT),
    "user without content": (chat([{"role": "user"}]), BAD, r.INVALID_CONTENT),
    "user with null content": (chat([{"role": "user", "content": None}]), BAD, r.INVALID_CONTENT),
    "user with no parts": (chat([{"role": "user", "content": []}]), BAD, r.INVALID_CONTENT),
    "system without content": (chat([{"role": "system"}, {"role": "user", "content": "x"}]), BAD, r.INVALID_CONTENT),
    "required without tools": (chat(tool_choice="required"), BAD, r.INVALID_TOOL_CHOICE),
    "named unknown tool": (
        chat(
            tools=[{"type": "function", "function": {"name": "f"}}],
            tool_choice={"type": "function", "function": {"name": "g"}},
        ),
        BAD,
        r.INVALID_TOOL_CHOICE,
    ),
    "odd tool choice": (chat(tool_choice="sometimes"), BAD, r.INVALID_TOOL_CHOICE),
    "generation prompt and continue": (chat(continue_final_message=True), BAD, r.CONFLICTING_OPTIONS),
    "reserved kwarg": (chat(chat_template_kwargs={"chat_template": "{{ 1 }}"}), BAD, r.RESERVED_TEMPLATE_KWARG),
    "untrusted template": (chat(chat_template="{{ messages }}"), PRECONDITION, r.CHAT_TEMPLATE_NOT_TRUSTED),
    "too many messages": (chat([{"role": "user", "content": "x"}] * 65), BAD, r.TOO_MANY_MESSAGES),
    "request too large": (chat([{"role": "user", "content": "x" * 70000}]), BAD, r.REQUEST_TOO_LARGE),
    "prompt too long": (chat([{"role": "user", "content": " hi" * 10000}]), RANGE, r.PROMPT_TOO_LONG),
    "max_tokens too large": (chat(max_tokens=8192), RANGE, r.MAX_TOKENS_TOO_LARGE),
    "truncate zero": (chat(truncate_prompt_tokens=0), RANGE, r.TRUNCATE_PROMPT_TOKENS_INVALID),
    "truncate past the model": (chat(truncate_prompt_tokens=9000), RANGE, r.TRUNCATE_PROMPT_TOKENS_INVALID),
    "truncation side": (chat(truncation_side="middle"), BAD, r.INVALID_TRUNCATION_SIDE),
    "negative temperature": (chat(temperature=-1), BAD, r.INVALID_SAMPLING_PARAM),
    "negative max_tokens": (chat(max_tokens=-1), BAD, r.INVALID_SAMPLING_PARAM),
    "stop id outside vocab": (chat(stop_token_ids=[10**6]), BAD, r.TOKEN_ID_OUT_OF_VOCAB),
}


@pytest.mark.parametrize("name", CHAT_CASES)
async def test_render_chat_errors(stub, name):
    request, code, reason = CHAT_CASES[name]
    await expect(stub.RenderChat(request), code, reason)


async def test_an_empty_turn_names_its_message(stub):
    error = await expect(
        stub.RenderChat(chat([{"role": "user", "content": "a"}, {"role": "user"}])), BAD, r.INVALID_CONTENT
    )
    assert error.violations[0][0] == "messages[1].content"


def test_a_tool_call_cut_short_is_accepted_in_history(renderers):
    """A forced call cut by max_tokens leaves arguments that are not JSON; an agent loop sends it back as the
    server produced it. The template sees `{}` for them, as vLLM coerces them (and JSON that is no object)."""
    qwen = renderers["qwen3"]  # renders each call's arguments with tojson

    def prompt(arguments: str) -> str:
        call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
        history = [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ]
        return qwen.text(qwen.prepare(chat(history)))

    assert '"arguments": {}' in prompt('{"city": "Pa') and prompt('{"city": "Pa') == prompt("{}") == prompt("[1, 2]")
    assert '"arguments": {"city": "Paris"}' in prompt('{"city": "Paris"}')


async def test_unknown_model_is_not_found(stub):
    await expect(stub.RenderChat(chat(model="gpt-9")), "NOT_FOUND", r.MODEL_NOT_FOUND)
    assert (await stub.RenderChat(chat(model="other-name"))).generate_request.model == "smol"


async def test_batch_errors_name_the_conversation(stub):
    batch = render_pb2.RenderChatBatchRequest(requests=[chat(), chat([{"role": "", "content": "x"}])])
    error = await expect(stub.RenderChatBatch(batch), BAD, r.INVALID_ROLE)
    assert error.metadata["index"] == "1"
    assert error.violations[0][0] == "requests[1].messages[0].role"
    too_many = render_pb2.RenderChatBatchRequest(requests=[chat()] * 65)
    await expect(stub.RenderChatBatch(too_many), BAD, r.TOO_MANY_REQUESTS)


TEMPLATE_CASES = {
    "raises": ("{{ raise_exception('roles must alternate') }}", BAD, r.TEMPLATE_ERROR),
    "bad syntax": ("{% for %}", BAD, r.TEMPLATE_ERROR),
    "sandbox escape": ("{{ messages.__class__.__mro__ }}{{ ''.__class__.__subclasses__() }}", BAD, r.TEMPLATE_ERROR),
    "endless loops": (NESTED_LOOPS, BAD, r.TEMPLATE_TIMEOUT),
    "huge output": (HUGE_OUTPUT, BAD, r.TEMPLATE_OUTPUT_TOO_LARGE),
    "huge repeat": ("{{ 'x' * 10**9 }}", BAD, r.TEMPLATE_OUTPUT_TOO_LARGE),
    "huge width": ("{{ 'x' | center(10**9) }}", BAD, r.TEMPLATE_OUTPUT_TOO_LARGE),
    "doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
        BAD,
        r.TEMPLATE_OUTPUT_TOO_LARGE,
    ),
}


@pytest.mark.parametrize("name", TEMPLATE_CASES)
async def test_request_template_limits(trusting_stub, name):
    template, code, reason = TEMPLATE_CASES[name]
    request = chat([{"role": "user", "content": "y" * 100}], chat_template=template)
    await expect(trusting_stub.RenderChat(request), code, reason)


async def test_server_keeps_serving_after_a_timeout(trusting_stub):
    await expect(trusting_stub.RenderChat(chat(chat_template=NESTED_LOOPS)), BAD, r.TEMPLATE_TIMEOUT)
    ok = await trusting_stub.RenderChat(chat(chat_template="{% for m in messages %}{{ m.content }}{% endfor %}"))
    assert len(ok.generate_request.token_ids) == 1


def completion(**fields) -> render_pb2.RenderCompletionRequest:
    return json_format.ParseDict(fields, render_pb2.RenderCompletionRequest())


COMPLETION_CASES = {
    "no prompt": (completion(), BAD, r.MISSING_PROMPT),
    "two forms": (completion(prompts=["a"], prompt_token_ids=[{"token_ids": [1]}]), BAD, r.CONFLICTING_OPTIONS),
    "empty prompt": (completion(prompts=[""]), BAD, r.EMPTY_PROMPT),
    "id outside vocab": (completion(prompt_token_ids=[{"token_ids": [1, 49152]}]), BAD, r.TOKEN_ID_OUT_OF_VOCAB),
    "suffix": (completion(prompts=["a"], suffix="z"), BAD, r.UNSUPPORTED_FIELD),
    "top_p zero": (completion(prompts=["a"], top_p=0), BAD, r.INVALID_SAMPLING_PARAM),
    "logprobs too many": (completion(prompts=["a"], logprobs=50), BAD, r.INVALID_SAMPLING_PARAM),
    "offsets of ids": (
        completion(prompt_token_ids=[{"token_ids": [1]}], return_token_offsets=True),
        BAD,
        r.UNSUPPORTED_FIELD,
    ),
    "unknown model": (completion(prompts=["a"], model="x"), "NOT_FOUND", r.MODEL_NOT_FOUND),
}


@pytest.mark.parametrize("name", COMPLETION_CASES)
async def test_render_completion_errors(stub, name):
    request, code, reason = COMPLETION_CASES[name]
    await expect(stub.RenderCompletion(request), code, reason)


async def test_tokenize_and_detokenize_errors(stub):
    both = render_pb2.TokenizeRequest(prompt="a", messages=[chat().messages[0]])
    await expect(stub.Tokenize(both), BAD, r.CONFLICTING_OPTIONS)
    await expect(stub.Detokenize(render_pb2.DetokenizeRequest(tokens=[-1])), BAD, r.TOKEN_ID_OUT_OF_VOCAB)


async def test_bridge_errors(stub, trusting_stub):
    request = render_pb2.BridgeChatRequest(completion_token_ids=[5], request=chat())
    await expect(stub.BridgeChat(request), BAD, r.MISSING_PREVIOUS_PROMPT)
    request = render_pb2.BridgeChatRequest(previous_prompt_token_ids=[1], request=chat(chat_template=FORGETS_ASSISTANT))
    await expect(trusting_stub.BridgeChat(request), PRECONDITION, r.TEMPLATE_NOT_BRIDGEABLE)
    request = render_pb2.BridgeChatRequest(previous_prompt_token_ids=[1], request=chat(), prefix_hash="not-a-key")
    error = await expect(stub.BridgeChat(request), BAD, r.INVALID_PREFIX_HASH)
    assert error.violations[0][0] == "prefix_hash"


async def test_large_requests_time_out_in_the_worker_pool_too(trusting_stub):
    big = chat([{"role": "user", "content": "z" * 6000}], chat_template=NESTED_LOOPS)  # above --inline-bytes: offloaded
    await expect(trusting_stub.RenderChat(big), BAD, r.TEMPLATE_TIMEOUT)
    batch = render_pb2.RenderChatBatchRequest(
        requests=[chat(chat_template="{{ m }}"), chat(chat_template=NESTED_LOOPS)]
    )
    error = await expect(trusting_stub.RenderChatBatch(batch), BAD, r.TEMPLATE_TIMEOUT)
    assert error.metadata["index"] == "1"


async def test_a_full_render_queue_refuses_fast():
    big = chat([{"role": "user", "content": "z" * 6000}])  # above --inline-bytes: offloaded
    async with render_server("--render-threads", "1", "--max-pending-renders", "1") as stub:
        # A batch and eight renders at once on one thread with one pending slot: some are refused, each at once
        # with the queue's reason, and nothing else fails (a fixed pause before one probe raced the batch).
        batch = stub.RenderChatBatch(render_pb2.RenderChatBatchRequest(requests=[big] * 64))
        results = await asyncio.gather(batch, *(stub.RenderChat(big) for _ in range(8)), return_exceptions=True)
        answered = (render_pb2.RenderChatBatchResponse, render_pb2.RenderChatResponse, grpc.aio.AioRpcError)
        assert all(isinstance(x, answered) for x in results), results
        refused = [ServiceError.from_rpc_error(x) for x in results if isinstance(x, grpc.aio.AioRpcError)]
        assert refused and {(e.code.name, e.reason) for e in refused} == {("RESOURCE_EXHAUSTED", r.RENDER_QUEUE_FULL)}


async def test_request_templates_are_bounded_apart_from_other_renders():
    """Request templates hold a thread each for up to --template-timeout-s: past --max-pending-templates they are
    refused at once, and meanwhile large renders without a template still run in their own pool."""
    slow = "{% for i in range(100000) %}{% for j in range(50) %}{% endfor %}{% endfor %}{{ messages[0].content }}"
    async with render_server(
        "--trust-request-chat-template", "--template-workers", "1", "--max-pending-templates", "2"
    ) as stub:
        held = [asyncio.ensure_future(stub.RenderChat(chat(chat_template=slow))) for _ in range(2)]
        await asyncio.sleep(0.2)
        started = asyncio.get_running_loop().time()
        await expect(stub.RenderChat(chat(chat_template=slow)), "RESOURCE_EXHAUSTED", r.RENDER_QUEUE_FULL)
        assert asyncio.get_running_loop().time() - started < 0.5  # refused at once, not queued
        large = await stub.RenderChat(chat([{"role": "user", "content": "z" * 6000}]))
        assert large.generate_request.token_ids
        await asyncio.gather(*held, return_exceptions=True)


async def test_truncation_and_length_refusals_say_vllms_words(stub):
    """vLLM's pooling tests match these phrases (tests/entrypoints/pooling: basic/test_truncation.py, scoring/)."""
    past = await expect(stub.RenderChat(chat(truncate_prompt_tokens=9000)), RANGE, r.TRUNCATE_PROMPT_TOKENS_INVALID)
    assert past.message == (
        "truncate_prompt_tokens value is greater than max_model_len. Please request a smaller truncation size."
    )
    long = await expect(stub.RenderChat(chat([{"role": "user", "content": "word " * 9000}])), RANGE, r.PROMPT_TOO_LONG)
    assert "maximum context length" in long.message and "Please reduce the length of the input prompt." in long.message
