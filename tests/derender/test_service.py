"""The derender service over real gRPC: tool calls and ids across the three paths, completion shapes, logprobs,
usage, in-band errors and typed errors for bad input."""

from __future__ import annotations

import asyncio
import json
import random

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derender_svc.__main__ import build_parser
from derender_svc.service import DerenderService
from derender_svc.state_codec import encode_state
from scaleout.v1 import common_pb2, derender_pb2, derender_pb2_grpc, engine_pb2
from scaleout_common.errors import ServiceError
from tests.derender.calls import engine_messages, split, stream, twin
from tests.serving import serving

TOOLS = [common_pb2.Tool(type="function", function=common_pb2.FunctionDefinition(name="get_weather"))]
CALLS = (
    'Checking.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>'
)


def chunks_of(ids, size=3):
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def tool_calls(responses):
    calls: dict[int, dict] = {}
    for response in responses:
        for choice in response.chat.choices:
            for call in choice.delta.tool_calls:
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] = entry["id"] or call.id
                entry["name"] = entry["name"] or call.function.name
                entry["arguments"] += call.function.arguments
    return [calls[i] for i in sorted(calls)]


@pytest.mark.parametrize("parallel", [True, False])
async def test_tool_calls_agree_across_paths(stub, hf_tokenizer, parallel):
    context = derender_pb2.DerenderContext(id="chatcmpl-tools", tools=TOOLS, parallel_tool_calls=parallel)
    messages = engine_messages(chunks_of(hf_tokenizer.encode(CALLS, add_special_tokens=False)) + [[2]], stop_token_id=2)
    unary = await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages))
    choice = unary.choices[0]
    expected = [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in choice.message.tool_calls
    ]
    cities = ["Paris", "Tokyo"] if parallel else ["Paris"]
    assert [json.loads(c["arguments"])["city"] for c in expected] == cities
    assert all(c["id"].startswith("call_") and c["name"] == "get_weather" for c in expected)
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Checking."
    for responses in (await stream(stub, context, messages), await twin(stub, context, messages)):
        assert tool_calls(responses) == expected
        finishes = [c.finish_reason for r in responses for c in r.chat.choices if c.finish_reason]
        assert finishes == ["tool_calls"]


async def test_reasoning_and_role_once(stub, hf_tokenizer):
    text = "<think>Two plus two.</think>It is 4."
    context = derender_pb2.DerenderContext(id="chatcmpl-think", reasoning_parser="think", include_usage=True)
    messages = engine_messages(chunks_of(hf_tokenizer.encode(text, add_special_tokens=False), 2))
    responses = await stream(stub, context, messages)
    deltas = [c.delta for r in responses for c in r.chat.choices]
    assert [d.role for d in deltas if d.role] == ["assistant"]
    assert "".join(d.reasoning_content for d in deltas) == "Two plus two."
    assert "".join(d.content for d in deltas) == "It is 4."
    assert [r.chat.HasField("usage") for r in responses][-1] and not any(
        r.chat.HasField("usage") for r in responses[:-1]
    )
    assert responses[-1].chat.usage.completion_tokens == sum(map(len, (m.choices[0].token_ids for m in messages)))


async def test_completion_flat_index_echo_reasoning_and_usage(stub, hf_tokenizer):
    prompts = []
    for p, text in enumerate(["<think>hm</think> one", " two"]):
        context = derender_pb2.DerenderContext(
            id="cmpl-1",
            n=2,
            prompt_index=p,
            echo=p == 1,
            prompt_text="Say",
            num_prompt_tokens=3,
            reasoning_parser="think",
        )
        results = []
        for index in range(2):
            results += engine_messages([hf_tokenizer.encode(text, add_special_tokens=False)], index=index)
        results[0].finished = False  # one stream: only its last message is `finished`
        prompts.append(derender_pb2.CompletionResult(context=context, results=results))
    completion = await stub.DerenderCompletion(derender_pb2.DerenderCompletionRequest(prompts=prompts))
    assert [c.index for c in completion.choices] == [0, 1, 2, 3]
    assert [c.text for c in completion.choices] == [" one", " one", "Say two", "Say two"]
    assert completion.choices[0].reasoning_content == "hm"
    assert completion.object == "text_completion"
    assert completion.usage.prompt_tokens == 6 and completion.usage.completion_tokens == 2 * (
        len(hf_tokenizer.encode("<think>hm</think> one")) + len(hf_tokenizer.encode(" two"))
    )


async def test_logprobs_repair_partial_characters(stub, hf_tokenizer):
    ids = hf_tokenizer.encode("你好", add_special_tokens=False)
    assert len(ids) == 4  # two tokens per character
    context = derender_pb2.DerenderContext(id="chatcmpl-lp", top_logprobs=1)
    unary = await stub.DerenderChat(
        derender_pb2.DerenderChatRequest(
            context=context, results=engine_messages([ids[:1], ids[1:3], ids[3:]], logprobs=True)
        )
    )
    content = unary.choices[0].logprobs.content
    assert [c.token for c in content] == ["bytes:\\xe4\\xbd", "你", "bytes:\\xe5\\xa5", "好"]
    assert b"".join(bytes(c.bytes) for c in content).decode() == "你好"
    assert all(len(c.top_logprobs) == 1 and c.top_logprobs[0].logprob == -0.25 for c in content)
    context.endpoint = derender_pb2.ENDPOINT_COMPLETION
    prompt = derender_pb2.CompletionResult(context=context, results=engine_messages([ids], logprobs=True))
    completion = await stub.DerenderCompletion(derender_pb2.DerenderCompletionRequest(prompts=[prompt]))
    logprobs = completion.choices[0].logprobs
    assert list(logprobs.text_offset) == [0, 0, 1, 1]  # characters before each token's own (partial) bytes
    assert len(logprobs.top_logprobs[0].entries) == 1


async def test_echo_with_logprobs_scores_the_prompt_first(stub, hf_tokenizer):
    prompt_ids = hf_tokenizer.encode("Say hi", add_special_tokens=False)
    context = derender_pb2.DerenderContext(
        id="cmpl-echo", endpoint=derender_pb2.ENDPOINT_COMPLETION, echo=True, prompt_text="Say hi", top_logprobs=1
    )
    context.prompt_token_ids.extend(prompt_ids)
    results = engine_messages([hf_tokenizer.encode(" there", add_special_tokens=False)], logprobs=True)
    scored = results[0].prompt.logprobs
    scored.logprobs.extend([-1.5] * (len(prompt_ids) - 1))
    for token_id in prompt_ids[1:]:
        scored.top.add(token_ids=[token_id], logprobs=[-1.5])
    prompt = derender_pb2.CompletionResult(context=context, results=results)
    choice = (await stub.DerenderCompletion(derender_pb2.DerenderCompletionRequest(prompts=[prompt]))).choices[0]
    logprobs = choice.logprobs
    assert choice.text == "Say hi there" and "".join(logprobs.tokens) == choice.text
    assert logprobs.unscored_tokens == 1 and not logprobs.top_logprobs[0].entries
    assert list(logprobs.token_logprobs) == [0.0] + [-1.5] * (len(prompt_ids) - 1) + [-0.25]
    assert logprobs.text_offset[0] == 0 and logprobs.text_offset[len(prompt_ids)] == len("Say hi")
    del scored.logprobs[-1], scored.top[-1]  # one row short of the prompt: refused, never misaligned
    prompt = derender_pb2.CompletionResult(context=context, results=results)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.DerenderCompletion(derender_pb2.DerenderCompletionRequest(prompts=[prompt]))
    assert ServiceError.from_rpc_error(caught.value).reason == "LOGPROBS_MISMATCH"


async def test_vllms_prompt_logprobs_and_tokens_as_token_ids(stub, hf_tokenizer):
    """vLLM's `prompt_logprobs` on each choice (the prompt's own token with its rank, then the alternatives other
    than it) and `return_tokens_as_token_ids` naming the output's tokens and alternatives by id."""
    prompt_ids = hf_tokenizer.encode("Say hi", add_special_tokens=False)
    context = derender_pb2.DerenderContext(
        id="cmpl-p",
        endpoint=derender_pb2.ENDPOINT_COMPLETION,
        top_logprobs=1,
        prompt_logprobs=2,
        return_tokens_as_token_ids=True,
    )
    context.prompt_token_ids.extend(prompt_ids)
    output = hf_tokenizer.encode(" there", add_special_tokens=False)
    results = engine_messages([output], logprobs=True)
    scored = results[0].prompt.logprobs
    scored.logprobs.extend([-1.5] * (len(prompt_ids) - 1))
    scored.ranks.extend([2] * (len(prompt_ids) - 1))
    for token_id in prompt_ids[1:]:
        scored.top.add(token_ids=[7, token_id], logprobs=[-0.5, -1.5])
    prompt = derender_pb2.CompletionResult(context=context, results=results)
    choice = (await stub.DerenderCompletion(derender_pb2.DerenderCompletionRequest(prompts=[prompt]))).choices[0]
    assert list(choice.logprobs.tokens) == [f"token_id:{t}" for t in output]
    assert choice.logprobs.top_logprobs[0].entries[0].token == f"token_id:{output[0]}"
    first, *positions = choice.prompt_logprobs
    assert not first.token_ids and len(positions) == len(prompt_ids) - 1
    for token_id, position in zip(prompt_ids[1:], positions):
        assert list(position.token_ids) == [token_id, 7] and list(position.ranks) == [2, 1]
        assert list(position.logprobs) == [-1.5, -0.5]
        assert position.decoded_tokens[1] == hf_tokenizer.decode([7])  # text: as vLLM's decoded_token
    del scored.ranks[:]  # ranks are what vLLM's prompt logprobs carry: refused without them
    prompt = derender_pb2.CompletionResult(context=context, results=results)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.DerenderCompletion(derender_pb2.DerenderCompletionRequest(prompts=[prompt]))
    assert ServiceError.from_rpc_error(caught.value).reason == "LOGPROBS_MISMATCH"


async def test_engine_error_ends_stream_in_band(stub, hf_tokenizer):
    context = derender_pb2.DerenderContext(id="chatcmpl-err")
    error = status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message="kv cache full")
    messages = engine_messages([hf_tokenizer.encode("Hi", add_special_tokens=False)])
    messages[-1].finished = False
    messages.append(engine_pb2.GenerateResponse(error=error))
    responses = await stream(stub, context, messages)
    assert responses[-1].chat.error.message == "kv cache full"


@pytest.mark.parametrize("code", [code_pb2.OK, 17, -1])
async def test_an_in_band_error_without_an_error_code_is_refused(stub, code):
    """A unary call once re-raised it as a status OK, which gRPC cannot send: the call hung until a timeout."""
    results = [*engine_messages([[42]])[:-1], engine_pb2.GenerateResponse(error=status_pb2.Status(code=code))]
    request = derender_pb2.DerenderChatRequest(context=derender_pb2.DerenderContext(id="x"), results=results)
    await expect_error(stub.DerenderChat(request, timeout=10), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ERROR_STATUS")
    streamed = stream(stub, derender_pb2.DerenderContext(id="y"), results)
    await expect_error(streamed, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ERROR_STATUS")


async def expect_error(call, code, reason):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == code
    assert ServiceError.from_rpc_error(caught.value).reason == reason


async def test_typed_errors(stub, info):
    ok = derender_pb2.DerenderContext(id="chatcmpl-x")
    one = engine_messages([[42]])
    chat = lambda context, results=one: stub.DerenderChat(  # noqa: E731
        derender_pb2.DerenderChatRequest(context=context, results=results)
    )
    await expect_error(
        stub.DerenderChat(derender_pb2.DerenderChatRequest(results=one)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "MISSING_CONTEXT",
    )
    await expect_error(
        chat(derender_pb2.DerenderContext(tokenizer_fingerprint="sha256:other")),
        grpc.StatusCode.FAILED_PRECONDITION,
        "TOKENIZER_MISMATCH",
    )
    await expect_error(
        chat(ok, engine_messages([[info.vocab_size]])), grpc.StatusCode.INVALID_ARGUMENT, "TOKEN_ID_OUT_OF_VOCAB"
    )
    await expect_error(
        chat(derender_pb2.DerenderContext(top_logprobs=21)), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING_PARAM"
    )
    await expect_error(chat(derender_pb2.DerenderContext(n=10_000)), grpc.StatusCode.OUT_OF_RANGE, "TOO_MANY_CHOICES")
    await expect_error(
        chat(derender_pb2.DerenderContext(reasoning_parser="nope")), grpc.StatusCode.INVALID_ARGUMENT, "UNKNOWN_PARSER"
    )
    await expect_error(_stream_without_context(stub, one), grpc.StatusCode.INVALID_ARGUMENT, "MISSING_CONTEXT")
    await expect_error(
        stub.DerenderChunk(derender_pb2.DerenderChunkRequest(context=ok, engine_output=one[0], state=b"garbage")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_STATE",
    )
    await expect_error(
        stub.DerenderChunk(derender_pb2.DerenderChunkRequest(context=ok, engine_output=one[0], state=b"[" * 4000)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_STATE",
    )
    forged = encode_state({"i": ok.id, "c": {"0": {"d": {"e": [10**12], "p": [], "a": False}}}}, 4096)
    await expect_error(
        stub.DerenderChunk(derender_pb2.DerenderChunkRequest(context=ok, engine_output=one[0], state=forged)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_STATE",
    )
    first = await stub.DerenderChunk(derender_pb2.DerenderChunkRequest(context=ok, engine_output=one[0]))
    other = derender_pb2.DerenderContext(id="chatcmpl-other")
    await expect_error(
        stub.DerenderChunk(derender_pb2.DerenderChunkRequest(context=other, engine_output=one[0], state=first.state)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_STATE",
    )


async def _stream_without_context(stub, messages):
    async def requests():
        for message in messages:
            yield derender_pb2.DerenderStreamRequest(engine_output=message)

    return [r async for r in stub.DerenderStream(requests())]


async def test_state_size_is_bounded(stub, hf_tokenizer):
    """A tool call whose name comes after large arguments must be buffered: past the limit, a typed error."""
    rng = random.Random(0)
    noise = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(12_000))
    text = '<tool_call>{"arguments": {"blob": "' + noise + '"}, "name": "f"}</tool_call>'
    context = derender_pb2.DerenderContext(id="chatcmpl-big", tools=TOOLS)
    ids = hf_tokenizer.encode(text, add_special_tokens=False)
    await expect_error(
        twin(stub, context, engine_messages(chunks_of(ids, 64))), grpc.StatusCode.OUT_OF_RANGE, "STATE_TOO_LARGE"
    )
    responses = await stream(stub, context, engine_messages(chunks_of(ids, 64)))  # the stateful stream copes
    assert json.loads(tool_calls(responses)[0]["arguments"]) == {"blob": noise}


async def test_completion_stream_matches_unary(stub, hf_tokenizer):
    text = "<think>plan</think> Paris is the capital."
    context = derender_pb2.DerenderContext(
        id="cmpl-s",
        endpoint=derender_pb2.ENDPOINT_COMPLETION,
        n=1,
        prompt_index=2,
        echo=True,
        prompt_text="Q:",
        reasoning_parser="think",
        include_usage=True,
        continuous_usage_stats=True,
        stop=["capital"],
    )
    messages = engine_messages(chunks_of(hf_tokenizer.encode(text, add_special_tokens=False), 2))
    responses = await stream(stub, context, messages)
    assert {c.index for r in responses for c in r.completion.choices} == {2}
    assert "".join(c.text for r in responses for c in r.completion.choices) == "Q: Paris is the "
    assert "".join(c.reasoning_content for r in responses for c in r.completion.choices) == "plan"
    assert all(r.completion.HasField("usage") for r in responses)
    assert [c.stop_str for r in responses for c in r.completion.choices if c.finish_reason] == ["capital"]
    unary = await stub.DerenderCompletion(
        derender_pb2.DerenderCompletionRequest(
            prompts=[derender_pb2.CompletionResult(context=context, results=messages)]
        )
    )
    assert unary.choices[0].text == "Q: Paris is the " and unary.choices[0].index == 2


async def test_context_only_once(stub):
    async def requests():
        for _ in range(2):
            yield derender_pb2.DerenderStreamRequest(context=derender_pb2.DerenderContext(id="chatcmpl-2"))

    await expect_error(_collect(stub.DerenderStream(requests())), grpc.StatusCode.INVALID_ARGUMENT, "DUPLICATE_CONTEXT")


async def _collect(call):
    return [r async for r in call]


@pytest.mark.parametrize(
    "tool_parser,choice,text,content",
    [
        (
            "",
            derender_pb2.TOOL_CHOICE_MODE_AUTO,
            '<think>Need the weather.</think><tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
            None,
        ),
        (
            "pythonic",
            derender_pb2.TOOL_CHOICE_MODE_REQUIRED,
            '<think>Need the weather.</think>[get_weather(city="Oslo")]',
            None,
        ),
        (
            "llama3_json",
            derender_pb2.TOOL_CHOICE_MODE_AUTO,
            '<think>Need the weather.</think>{"name": "get_weather", "parameters": {"city": "Oslo"}}',
            None,
        ),
        ("", derender_pb2.TOOL_CHOICE_MODE_NAMED, '<think>Need the weather.</think>{"city": "Oslo"}', None),
        (
            "",
            derender_pb2.TOOL_CHOICE_MODE_NONE,
            '<think>Need the weather.</think>[get_weather(city="Oslo")]',
            '[get_weather(city="Oslo")]',
        ),
    ],
)
async def test_reasoning_then_tool_call(stub, hf_tokenizer, tool_parser, choice, text, content):
    context = derender_pb2.DerenderContext(
        id="chatcmpl-rt",
        tools=TOOLS,
        tool_choice=choice,
        tool_parser=tool_parser,
        tool_choice_function="get_weather",
        reasoning_parser="think",
        parallel_tool_calls=True,
    )
    messages = engine_messages(chunks_of(hf_tokenizer.encode(text, add_special_tokens=False), 2))
    unary = (await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages))).choices[0]
    assert unary.message.reasoning_content == "Need the weather."
    if content is None:
        named = choice == derender_pb2.TOOL_CHOICE_MODE_NAMED  # a forced function ends with "stop", as OpenAI's
        assert not unary.message.HasField("content") and unary.finish_reason == ("stop" if named else "tool_calls")
        assert [(c.function.name, json.loads(c.function.arguments)) for c in unary.message.tool_calls] == [
            ("get_weather", {"city": "Oslo"})
        ]
    else:
        assert unary.message.content == content and unary.finish_reason == "stop" and not unary.message.tool_calls
    streamed = await stream(stub, context, messages)
    assert [(c["name"], c["arguments"]) for c in tool_calls(streamed)] == [
        (c.function.name, c.function.arguments) for c in unary.message.tool_calls
    ]


OUTPUTS = {  # label: (tool parser, model output)
    "hermes": (
        "hermes",
        '<think>Plan.</think>Sure.<tool_call>{"name": "get_weather", "arguments": {"city": "Zürich 🌧"}}'
        '</tool_call><tool_call>{"arguments": {"city": "東京"}, "name": "get_weather"}</tool_call>',
    ),
    "llama3_json": (
        "llama3_json",
        '{"name": "get_weather", "parameters": {"city": "Zürich 🌧"}}; '
        '{"name": "get_weather", "parameters": {"city": "東京"}}',
    ),
    "pythonic": ("pythonic", '[get_weather(city="Zürich 🌧"), get_weather(city="東京")]'),
    "mistral": (
        "mistral",
        'Calling.[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Zürich 🌧"}}, '
        '{"name": "get_weather", "arguments": {"city": "東京"}}]',
    ),
    "mistral v11": (
        "mistral",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Zürich 🌧"}[TOOL_CALLS]get_weather[ARGS]{"city": "東京"}',
    ),
}


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(label=st.sampled_from(sorted(OUTPUTS)), cuts=st.lists(st.integers(1, 5), max_size=80))
async def test_tool_calls_under_random_chunking(stub, hf_tokenizer, label, cuts):
    """The stateful stream and the stateless twin give the unary result (ids included) whatever the chunking."""
    parser, text = OUTPUTS[label]
    context = derender_pb2.DerenderContext(
        id="chatcmpl-fuzz", tools=TOOLS, tool_parser=parser, reasoning_parser="think", parallel_tool_calls=True
    )
    messages = engine_messages(split(hf_tokenizer.encode(text, add_special_tokens=False), cuts))
    unary = (await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages))).choices[0]
    expected = [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in unary.message.tool_calls
    ]
    assert [json.loads(c["arguments"]) for c in expected] == [{"city": "Zürich 🌧"}, {"city": "東京"}]
    for responses in (await stream(stub, context, messages), await twin(stub, context, messages)):
        assert tool_calls(responses) == expected
        assert "".join(c.delta.content for r in responses for c in r.chat.choices) == (unary.message.content or "")


async def test_open_streams_are_bounded(info):
    """Past --max-streams, a new stream is refused fast (RESOURCE_EXHAUSTED), the open one keeps working."""
    parser = build_parser()
    service = DerenderService(parser.parse_args(["--max-streams", "1"]), info)
    async with serving(service, parser) as target, grpc.aio.insecure_channel(target) as channel:
        stub = derender_pb2_grpc.DerenderServiceStub(channel)
        first = stub.DerenderStream()
        await first.write(derender_pb2.DerenderStreamRequest(context=derender_pb2.DerenderContext(id="chatcmpl-a")))
        while service.active_streams == 0:
            await asyncio.sleep(0.01)
        await expect_error(
            _collect(stub.DerenderStream(iter([]))), grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_STREAMS"
        )
        await first.write(derender_pb2.DerenderStreamRequest(engine_output=engine_messages([[42]])[0]))
        assert (await first.read()).chat.choices[0].finish_reason == "stop"


async def test_concurrent_streams_keep_their_own_state(stub, hf_tokenizer):
    """Many streams interleaved on one server: each one's text equals its own unary result."""
    texts = ["<think>a</think>Paris 你好", "Zürich 🌧 " * 5, "STOP here? no, STOP!", "[f(x=1)] tail", "plain " * 9]
    jobs = []
    for i, text in enumerate(texts * 2):
        context = derender_pb2.DerenderContext(
            id=f"chatcmpl-{i}",
            reasoning_parser="think",
            stop=["!"],
            tools=TOOLS,
            tool_parser="pythonic",
            parallel_tool_calls=True,
        )
        messages = engine_messages(chunks_of(hf_tokenizer.encode(text, add_special_tokens=False), 1 + i % 3))
        jobs.append((context, messages))
    results = await asyncio.gather(*(stream(stub, c, m) for c, m in jobs))
    for (context, messages), responses in zip(jobs, results):
        unary = await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages))
        message = unary.choices[0].message
        deltas = [c.delta for r in responses for c in r.chat.choices]
        assert "".join(d.content for d in deltas) == (message.content or "")
        assert "".join(d.reasoning_content for d in deltas) == message.reasoning_content
        assert tool_calls(responses) == [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls
        ]


async def test_twin_state_stays_small_on_long_outputs(stub, hf_tokenizer):
    """The state carries a window, not the output: it does not grow with the number of tokens."""
    text = "<think>" + "Reasoning about 数据 and café. " * 60 + "</think>" + "The answer, with 🎉 emoji. " * 60
    ids = hf_tokenizer.encode(text, add_special_tokens=False)
    context = derender_pb2.DerenderContext(id="chatcmpl-long", reasoning_parser="think", stop=["never"], top_logprobs=2)
    responses = await twin(stub, context, engine_messages(chunks_of(ids, 2), logprobs=True))
    sizes = [len(r.state) for r in responses]
    assert len(ids) > 800 and max(sizes) < 1024 and max(sizes[-50:]) <= max(sizes[:50]) + 64


async def test_a_stream_answers_its_headers_before_any_message(stub):
    """The gateway bounds the time to a request's answer (request_timeout): a stream the one-hop service opens long
    before the engine's first token must have started its answer at once."""
    call = stub.DerenderStream()
    assert await asyncio.wait_for(call.initial_metadata(), 10) is not None
    call.cancel()
