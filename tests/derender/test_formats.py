"""Every registered format against its cases (format_cases.py, parser_cases.py): one-shot result as expected,
and the same result streamed under random chunkings with the state round-tripped through JSON between
pieces (as the stateless twin does). Then marker soup for every parser: no exception, chunking invariant."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from derender_svc.parsers import REASONING_PARSERS, TOOL_PARSERS, make_tool_parser
from tests.derender import format_cases
from tests.derender.format_cases import TOOLS
from tests.derender.response_templates import template_info

MODEL = template_info()  # the model data of the parsers a response_template declares (Gemma 4's)


def feed_all(build, text: str, cuts: list[int]):
    """Feed `text` in pieces, rebuilding the parser from its JSON state before each; fold the outputs."""
    pieces, start = [], 0
    for size in cuts:
        pieces.append(text[start : start + size])
        start += size
    pieces.append(text[start:])
    state, firsts, seconds = None, [], []
    for i, piece in enumerate(pieces):
        parser = build(json.loads(json.dumps(state)) if state is not None else None)
        first, second = parser.feed(piece, i == len(pieces) - 1)
        state = parser.state()
        firsts.append(first)
        seconds.append(second)
    if seconds and isinstance(seconds[0], str):
        return "".join(firsts), "".join(seconds)
    calls: dict[int, list] = {}
    for delta in (d for batch in seconds for d in batch):
        entry = calls.setdefault(delta.index, [None, ""])
        entry[0] = entry[0] or delta.name
        entry[1] += delta.arguments
    return "".join(firsts), [tuple(calls[i]) for i in sorted(calls)]


def tool_builder(name: str):
    return lambda state: make_tool_parser(name, state, tools=TOOLS, model=MODEL)


def reasoning_builder(name: str, started: bool):
    cls = REASONING_PARSERS[name]

    def build(state):
        parser = cls(**state) if state is not None else cls.create(started)
        if getattr(cls, "TEMPLATE", False):  # the model's response_template (Gemma 4's here) declares the format
            parser.bind(MODEL)
        return parser

    return build


def chunkings(text: str, count: int = 6):
    rng = random.Random(len(text))
    yield [1] * len(text)
    for _ in range(count):
        yield [rng.randint(0, 9) for _ in range(len(text) // 2 + 1)]


TOOL_CASES = [
    pytest.param(name, *case, id=f"{name}-{i}")
    for name, cases in format_cases.TOOL_FORMATS.items()
    for i, case in enumerate(cases())
]


@pytest.mark.parametrize("name,text,content,calls", TOOL_CASES)
def test_tool_format(name, text, content, calls):
    build = tool_builder(name)
    got_content, got_calls = feed_all(build, text, [])
    assert got_content == content
    assert [(n, json.loads(a)) for n, a in got_calls] == calls
    for cuts in chunkings(text):
        assert feed_all(build, text, cuts) == (got_content, got_calls), cuts


REASONING_CASES = [
    pytest.param(name, *case, id=f"{name}-{i}")
    for name, cases in format_cases.reasoning_formats().items()
    for i, case in enumerate(cases)
]


@pytest.mark.parametrize("name,text,started,reasoning,content", REASONING_CASES)
def test_reasoning_format(name, text, started, reasoning, content):
    build = reasoning_builder(name, started)
    assert feed_all(build, text, []) == (reasoning, content)
    for cuts in chunkings(text):
        assert feed_all(build, text, cuts) == (reasoning, content), cuts


def test_every_format_has_40_cases():
    counts = {name: len(cases()) for name, cases in format_cases.TOOL_FORMATS.items()}
    counts |= {f"reasoning {name}": len(cases) for name, cases in format_cases.reasoning_formats().items()}
    assert min(counts.values()) >= 40, counts


def test_every_registered_class_has_cases():
    covered = {TOOL_PARSERS[n] for n in format_cases.TOOL_FORMATS} | {
        REASONING_PARSERS[n] for n in format_cases.reasoning_formats()
    }
    old = {TOOL_PARSERS[n] for n in ("hermes", "llama3_json", "pythonic", "mistral")} | {REASONING_PARSERS["think"]}
    templated = {TOOL_PARSERS["hf"], REASONING_PARSERS["hf"]}  # the model's template: test_response_template.py
    assert {*TOOL_PARSERS.values(), *REASONING_PARSERS.values()} <= covered | old | templated


PIECES = [
    *("<tool_call>", "</tool_call>", "<think>", "</think>", "<function=f>", "</function>", "<parameter=a>"),
    *("</parameter>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<tool_calls>", "</tool_calls>"),
    *("<minimax:tool_call>", '<invoke name="f">', "</invoke>", '<parameter name="a">', "<|tool_call|>", "```"),
    *("```json", "```tool_code", "<start_function_call>", "<end_function_call>", "<escape>", "call:f{"),
    *(format_cases.DS + format_cases.K + format_cases.H + ("<|return|>", "<|python_start|>", "<|python_end|>")),
    *("<answer>", "</answer>", "\n", " ", "{", "}", "[", "]", "(", ")", '"', "'", "\\", ":", ",", ";", "="),
    *('"name"', '"arguments"', '"f"', "f", "x", "1", "é", "🎉", "<", "<tool", "functions.f:0", "a=1", "◁think▷"),
    *("Here is my response:", "<unused94>thought", "<unused95>", "analysis", "final", "commentary to=functions.f"),
    *("<|channel>", "<channel|>", "thought\n", "<|tool_call>", "<tool_call|>", "call:f{", '<|"|>'),
    *(
        "<｜tool▁calls｜>",
        "<｜tool calls begin｜>",
        "function<｜tool▁sep｜>",
        "<|python_tag|>",
        "f.call(",
        "<seed:tool_call>",
    ),
    *("<｜DSML｜function_calls>", "</｜DSML｜function_calls>", "<｜DSML｜tool_calls>", '<｜DSML｜invoke name="f">'),
    *("</｜DSML｜invoke>", '<｜DSML｜parameter name="a" string="false">', "</｜DSML｜parameter>", "<｜DSML｜ calls>"),
    *("<｜tool_calls_begin｜>", "<｜tool_call_begin｜>", "<｜tool_sep｜>", '<steptml:invoke name="f">'),
    *('<steptml:parameter name="a">', "</steptml:parameter>", "</steptml:invoke>", "<｜tool_call_end｜>"),
    *("<｜tool_calls_end｜>", "<longcat_tool_call>", "</longcat_tool_call>"),
    *("functools", "<|action_start|><|plugin|>", "<|action_end|>", "<function_call>", "<|tool_call_start|>"),
    *("<|tool_call_end|>", "<function_calls>", "</function_calls>", "f(a=1)", "[TOOL_CALLS]", "<response>"),
    *("</response>", "]<]minimax[>[<tool_call>", "]<]minimax[>[</tool_call>", ']<]minimax[>[<invoke name="f">'),
    *("<dots_function_call>", "</dots_function_call>", "<|tools_prefix|>", "<|tools_suffix|>"),
    *("<|message_sep|>", "function call<|role_sep|>\n", "<|function_call|>"),
    *("<|open|>", "<|close|>", "<|sep|>", "tools", "response", "think", 'call tool="f" index="1"', "call"),
    *('argument key="a" type="string"', 'argument key="a" type="integer"', "argument"),
    *("]<]minimax[>[</invoke>", "]<]minimax[>[<a>", "]<]minimax[>[</a>", "]<]minimax[>[", "<mm:think>", "</mm:think>"),
    *("<|message_model|>", "<|content_text|>", "<|content_thinking|>", "<|end_message|>"),
    *("<|content_invoke_tool_json|>", "<|content_model_end_sampling|>"),
    *("<|start|>", "<|message|>", "<|eom|>", " to=self", "to=f", '<atem:invoke name="f">', "</atem:invoke>", "\\n"),
    *("<tool_sep>", "<ifm|tool_calls>", "<ifm|tool_call>", "</ifm|tool_call>", "</ifm|tool_calls>", "<|START_ACTION|>"),
    *("<|plamo:begin_tool_requests:plamo|>", "<|plamo:begin_tool_request:plamo|>", '<function name="f">', "<param"),
    *(">>>", "all\n", "f\n", "python\n", "<function=f>", "<TOOLCALL>", "</TOOLCALL>", "<iquest_tool_call>"),
    *("</iquest_tool_call>", "<｜GCML｜tool_calls>", "</｜GCML｜tool_calls>", '<｜GCML｜invoke name="f">'),
    *("</｜GCML｜invoke>", "<|inner_prefix|>", "<|inner_suffix|>", "Here are my reasoning steps:\n"),
    *("[BEGIN FINAL RESPONSE]", "[END FINAL RESPONSE]", "<|think|>", "<|end|>", "<|begin|>assistant"),
    *("<|content|>", "<|tool_calls|>", "<|calls|>", "<|tool_call:begin|>", "<|tool_call:name|>"),
    *("<|tool_call:args|>", "<|tool_call:end|>", "<use_mcp_tool>", "</use_mcp_tool>", "<tool_name>f</tool_name>"),
    *("<arguments>", "</arguments>"),
]
PARSERS = [tool_builder(n) for n in sorted(TOOL_PARSERS)] + [
    reasoning_builder(n, s) for n in sorted(REASONING_PARSERS) for s in (False, True)
]


@settings(max_examples=600, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), max_size=30),
    cuts=st.lists(st.integers(0, 9), max_size=40),
    which=st.integers(0, len(PARSERS) - 1),
)
def test_marker_soup(pieces, cuts, which):
    text = "".join(pieces)
    assert feed_all(PARSERS[which], text, cuts) == feed_all(PARSERS[which], text, [])


NAMED = [
    ('{"city": "Oslo"}', "", [("get_weather", {"city": "Oslo"})]),
    ('<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>', "", [("get_weather", {"city": "Oslo"})]),
    ('\n<tool_call>\n{"name": "other", "arguments": {"a": 1}}\n</tool_call>', "", [("get_weather", {"a": 1})]),
    ('<tool_call>{"name": "get_weather", "arguments": {"a": 1}}</tool_call><tool_call>{"name": "x"}</tool_call>', "",
     [("get_weather", {"a": 1})]),  # one function was asked for: later calls are not it
    ("<tool_call>oops</tool_call>", "<tool_call>oops</tool_call>", []),
]  # fmt: skip


@pytest.mark.parametrize("text,content,calls", NAMED)
def test_named_tool_choice(text, content, calls):
    build = lambda state: make_tool_parser("named", state, "get_weather")  # noqa: E731
    got = feed_all(build, text, [])
    assert got[0] == content and [(n, json.loads(a)) for n, a in got[1]] == calls
    for cuts in chunkings(text):
        assert feed_all(build, text, cuts) == got, cuts
