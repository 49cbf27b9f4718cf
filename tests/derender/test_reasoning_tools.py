"""Reasoning meets tool calls and the end of the answer, through the real derender server (unary, stateful stream,
stateless twin): a call opened inside the reasoning block ends the block and is a call (vLLM's and SGLang's
`tool_start_token`), `force_nonempty_content`, and a call the stream cut short."""

from __future__ import annotations

import json

import pytest
from google.protobuf import struct_pb2

from scaleout.v1 import common_pb2, derender_pb2
from tests.derender.calls import engine_messages, stream, twin
from tests.derender.case_kit import K

WEATHER = common_pb2.Tool(
    type="function",
    function=common_pb2.FunctionDefinition(
        name="get_weather",
        parameters=struct_pb2.Struct(fields={"type": struct_pb2.Value(string_value="object")}),
    ),
)
PARIS = [("get_weather", {"city": "Paris"})]


def _context(reasoning: str, tool: str, **kwargs) -> derender_pb2.DerenderContext:
    return derender_pb2.DerenderContext(
        id="chatcmpl-rt",
        reasoning_parser=reasoning,
        tool_parser=tool,
        tools=[WEATHER],
        parallel_tool_calls=True,
        **kwargs,
    )


def _folded(responses) -> tuple[str, str, list]:
    """(reasoning, content, calls) of choice 0 over streamed chunks."""
    reasoning = content = ""
    calls: dict[int, list] = {}
    for response in responses:
        for choice in response.chat.choices:
            reasoning += choice.delta.reasoning_content
            content += choice.delta.content
            for call in choice.delta.tool_calls:
                entry = calls.setdefault(call.index, ["", ""])
                entry[0] = entry[0] or call.function.name
                entry[1] += call.function.arguments
    return reasoning, content, [(n, json.loads(a)) for n, a in (calls[i] for i in sorted(calls))]


async def answers(stub, hf_tokenizer, context, text: str, **finish) -> tuple[tuple, list[tuple]]:
    """The unary (reasoning, content, calls) and the same folded from the stream and the twin (one token each)."""
    ids = hf_tokenizer.encode(text, add_special_tokens=False)
    messages = engine_messages([[i] for i in ids], **finish)
    unary = await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages))
    message = unary.choices[0].message
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls]
    one = (message.reasoning_content, message.content, calls)
    return one, [_folded(await stream(stub, context, messages)), _folded(await twin(stub, context, messages))]


CALL_IN_REASONING = [
    ("glm45", "glm45", "<think>I need the weather<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris"
     "</arg_value></tool_call>"),
    ("glm45", "glm45", "<think>I need the weather\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris"
     "</arg_value>\n</tool_call>"),
    ("kimi_k2", "kimi_k2", f"<think>I need the weather{K[0]}{K[1]}functions.get_weather:0{K[2]}"
     '{"city": "Paris"}' f"{K[3]}{K[4]}"),
    ("hunyuan", "hunyuan", '<think>\nI need the weather<tool_calls>[{"name": "get_weather", "arguments": '
     '{"city": "Paris"}}]</tool_calls>'),
    ("qwen3", "hermes", '<think>I need the weather<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
     "\n</tool_call>"),
    ("nemotron_v3", "hermes", '<think>I need the weather<tool_call>{"name": "get_weather", "arguments": '
     '{"city": "Paris"}}</tool_call>'),
    ("gemma4", "gemma4", '<|channel>thought\nI need the weather<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}'
     "<tool_call|>"),
    ("gemma4", "gemma4", '<|channel>thought\nI need the weather<channel|>call:get_weather{city:<|"|>Paris<|"|>}'),
    # forced families (no start tag) and the other tool openers vLLM's grammars end the block on
    ("minimax_m2", "minimax_m2", 'I need the weather<minimax:tool_call>\n<invoke name="get_weather">\n'
     '<parameter name="city">Paris</parameter>\n</invoke>\n</minimax:tool_call>'),
    ("step3p5", "step3p5", "I need the weather<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
     "</parameter>\n</function>\n</tool_call>"),
    ("qwen3-thinking", "hermes", 'I need the weather\n<tool_call>\n{"name": "get_weather", "arguments": '
     '{"city": "Paris"}}\n</tool_call>'),
    ("mistral", "mistral", '[THINK]I need the weather[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'),
    ("seed_oss", "seed_oss", "<seed:think>I need the weather<seed:tool_call>\n<function=get_weather>\n"
     "<parameter=city>Paris</parameter>\n</function>\n</seed:tool_call>"),
    ("deepseek_v4", "deepseek_v4", 'I need the weather<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
     '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'),
    ("kimi_k3", "kimi_k3", 'I need the weather<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>'
     '<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|>'
     "<|close|>tools<|sep|>"),
    ("minimax_m3", "minimax_m3", '<mm:think>I need the weather]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke '
     'name="get_weather">\n]<]minimax[>[<city>Paris]<]minimax[>[</city>\n]<]minimax[>[</invoke>\n'
     "]<]minimax[>[</tool_call>"),
    ("mimo", "mimo", "I need the weather<tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
     "</function>\n</tool_call>"),
    ("QWEN3", "Hermes", '<think>I need the weather<tool_call>{"name": "get_weather", "arguments": '
     '{"city": "Paris"}}</tool_call>'),  # names match ignoring case, as SGLang's
    # vLLM 0.33's additions (a call after the block where the family has no opener that ends it)
    ("k2_horizon", "k2_horizon", "I need the weather<ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>city"
     "</ifm|arg_key><ifm|arg_value>Paris</ifm|arg_value></ifm|tool_call></ifm|tool_calls>"),
    ("plamo3", "plamo3", "I need the weather<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|>"
     "<|plamo:begin_tool_name:plamo|>get_weather<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|>"
     '<|plamo:constrain|>json<|plamo:msg|>{"city": "Paris"}<|plamo:end_tool_arguments:plamo|>'
     "<|plamo:end_tool_request:plamo|><|plamo:end_tool_requests:plamo|>"),
    ("cohere_command3", "cohere_command3", '<|START_THINKING|>I need the weather<|START_ACTION|>[{"tool_call_id": '
     '"0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}]<|END_ACTION|>'),
    ("granite_thinking_parser", "qwen3_coder", "<think>I need the weather<tool_call>\n<function=get_weather>\n"
     "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"),
    ("minicpmv", "qwen3_coder", "<think>I need the weather<tool_call>\n<function=get_weather>\n<parameter=city>\n"
     "Paris\n</parameter>\n</function>\n</tool_call><|im_end|>"),
    ("hy_v3", "hy_v3", "<think>I need the weather</think><tool_calls><tool_call>get_weather<tool_sep><arg_key>city"
     "</arg_key>\n<arg_value>Paris</arg_value></tool_call></tool_calls>"),
    ("hy_v4", "hy_v4", "I need the weather</think>\n<tool_calls><tool_call>get_weather<arg_key>city</arg_key>"
     "<arg_value>Paris</arg_value></tool_call></tool_calls>"),
    ("inkling", "inkling", '<|content_thinking|>I need the weather<|content_invoke_tool_json|>{"name": '
     '"get_weather", "args": {"city": "Paris"}}<|end_message|>'),
    ("muse", "muse", ' to=self<|message|>I need the weather to=get_weather<|message|><atem:function_calls>\n'
     '<atem:invoke name="get_weather">\n<atem:parameter name="city">Paris</atem:parameter>\n</atem:invoke>\n'
     "</atem:function_calls><|eom|>"),
]  # fmt: skip


@pytest.mark.parametrize("reasoning,tool,text", CALL_IN_REASONING)
async def test_a_call_inside_the_reasoning_ends_it(stub, hf_tokenizer, reasoning, tool, text):
    one, streamed = await answers(stub, hf_tokenizer, _context(reasoning, tool), text)
    assert one[0].strip() == "I need the weather" and one[1:] == ("", PARIS)
    assert all(s == one for s in streamed), streamed


CUT = [
    ("pythonic", "Sure! [get_weather(city=", "Sure! "),
    ("hermes", '<tool_call>{"name": "get_weather", "arguments": {"city": "Par', ""),
    ("kimi_k2", f'{K[0]}{K[1]}functions.get_weather:0{K[2]}{{"city"', ""),
    ("glm45", "Let me see.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Pa", "Let me see."),
]


@pytest.mark.parametrize("tool,text,shown", CUT)
async def test_a_call_the_stream_ends_inside_is_not_content(stub, hf_tokenizer, tool, text, shown):
    """vLLM's streaming shows nothing for it; a one-shot answer keeps the text, as vLLM's one-shot parse does."""
    one, streamed = await answers(stub, hf_tokenizer, _context("none", tool), text)
    assert one == ("", text, [])
    assert streamed == [("", shown, [])] * 2


MALFORMED = [
    '[get_weather(city="Paris"), get_time(tz="UTC"]',
    '[get_weather(city="Paris"), get_time(tz=)]',
    '[get_weather(city="Paris"), get_time(tz="UTC)]',
    '[get_weather(city="Paris"), 42, get_time("UTC")]',
]


@pytest.mark.parametrize("text", MALFORMED)
async def test_pythonic_keeps_the_good_calls_of_a_list(stub, hf_tokenizer, text):
    one, streamed = await answers(stub, hf_tokenizer, _context("none", "pythonic"), text)
    assert one == ("", "", PARIS) and streamed == [one] * 2


def _kwargs(**values) -> struct_pb2.Struct:
    kwargs = struct_pb2.Struct()
    kwargs.update(values)
    return kwargs


FORCE = _kwargs(force_nonempty_content=True)
NONEMPTY = [  # (kwargs, started, output, one-shot (reasoning, content), streamed (reasoning, content))
    (FORCE, False, "<think>All reasoning, cut", ("", "All reasoning, cut"), ("All reasoning, cut",) * 2),
    (FORCE, True, "All reasoning, no answer</think>", ("", "All reasoning, no answer"), ("All reasoning, no answer", "")),
    (FORCE, False, "<think>Reasoning</think>The answer is 42.", ("Reasoning", "The answer is 42."), None),
    (_kwargs(enable_thinking=False), True, "The answer.</think>   ", ("   ", "The answer."), ("The answer.", "   ")),
    (_kwargs(force_nonempty_content=False), False, "<think>cut", ("cut", ""), None),
]  # fmt: skip


@pytest.mark.parametrize("kwargs,started,text,one_shot,streamed", NONEMPTY)
async def test_force_nonempty_content(stub, hf_tokenizer, kwargs, started, text, one_shot, streamed):
    """SGLang's and vLLM's swap (nonempty.py): one-shot, a blank content swaps with the reasoning; a stream that
    ends inside the block sends its reasoning again as content."""
    context = _context("nemotron_v3", "none", chat_template_kwargs=kwargs, reasoning_started=started)
    one, folded = await answers(stub, hf_tokenizer, context, text)
    assert one == (*one_shot, [])
    assert folded == [(*(streamed or one_shot), [])] * 2


@pytest.mark.parametrize(
    "parser,kwargs",
    [
        ("telechat4", _kwargs()),
        ("telechat4", _kwargs(force_nonempty_content=False)),
        ("xing4_0", _kwargs()),
        ("granite_thinking_parser", _kwargs(enable_thinking=False)),
    ],
)
async def test_force_nonempty_content_by_parser(stub, hf_tokenizer, parser, kwargs):
    """SGLang's TeleChat4 (XingChen4, Xing4.0) detectors default force_nonempty_content on and the kwarg can only turn
    it on; its granite_thinking_parser turns it on with enable_thinking false."""
    context = _context(parser, "none", chat_template_kwargs=kwargs, reasoning_started=True)
    one, folded = await answers(stub, hf_tokenizer, context, "All reasoning, cut")
    assert one == ("", "All reasoning, cut", [])
    assert folded == [("All reasoning, cut", "All reasoning, cut", [])] * 2


THINKS, OFF = ("plan", "answer"), ("", "plan</think>answer")


@pytest.mark.parametrize(
    "parser,kwargs,expected",
    [
        ("iquest_q1", _kwargs(), THINKS),
        ("iquest_q1", _kwargs(enable_thinking=True), THINKS),
        ("iquest_q1", _kwargs(thinking=False), OFF),
        ("iquest_q1", _kwargs(thinking=False, enable_thinking=True), THINKS),
        ("iquest_q1", _kwargs(reasoning_effort="none"), THINKS),
        ("deepseek_v4", _kwargs(thinking=False), OFF),
        ("deepseek_v4", _kwargs(reasoning_effort="none"), OFF),
        ("deepseek-v41", _kwargs(enable_thinking=False), OFF),
        ("deepseek_v4", _kwargs(thinking=True), THINKS),
    ],
)
async def test_thinking_kwargs_unforce(stub, hf_tokenizer, parser, kwargs, expected):
    """A family that reasons from the first token does not when the template kwargs turn its thinking off: vLLM's
    deepseek_v4 / deepseek_v41 (thinking, enable_thinking, reasoning_effort "none"), SGLang's iquest_q1."""
    context = _context(parser, "none", chat_template_kwargs=kwargs)
    one, folded = await answers(stub, hf_tokenizer, context, "plan</think>answer")
    assert one == (*expected, []) and folded == [one] * 2
