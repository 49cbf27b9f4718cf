"""Tool formats carrying JSON (or Python) call objects inside a wrapper, and gpt-oss harmony: (output,
expected content, expected calls); at least 40 each."""

from __future__ import annotations

import itertools
import json

from tests.derender.case_kit import CONTENT, TWO, H, _j, _objects, _table
from tests.derender.parser_cases import ARGS, NAMES


def granite_cases():
    def render(calls, i):
        if i % 3 == 2:
            return "".join(f"<tool_call>{_j(o, i)}</tool_call>" for o in _objects(calls, i))
        return "<|tool_call|>" + _j(_objects(calls, i), i)

    return _table(
        render,
        [
            ('[{"name": "f", "arguments": {}}]', "", [("f", {})]),
            ("<|tool_call|>not json", "<|tool_call|>not json", []),
            ('<|tool_call|>[{"name": "f", "arguments": {"a": 1}}', '<|tool_call|>[{"name": "f", "arguments": {"a": 1}}',
             []),
            ('<|tool_call|>[{"arguments": {}}]', '<|tool_call|>[{"arguments": {}}]', []),
            # a bare list is a call only at the start; later it is prose
            ('The list: [{"name": "f", "arguments": {}}]', 'The list: [{"name": "f", "arguments": {}}]', []),
            (' [{"name": "f", "arguments": {}}] and [{"name": "g", "arguments": {}}]',
             ' and [{"name": "g", "arguments": {}}]', [("f", {})]),
            ('[{"name": "f", "arguments": {}}]\n<|tool_call|>[{"name": "g", "arguments": {}}]', "",
             [("f", {}), ("g", {})]),
        ],
    )  # fmt: skip


def _tool_calls_list(calls, i):
    return "<tool_calls>" + _j(_objects(calls, i), i) + "</tool_calls>"


def hunyuan_cases():
    return _table(
        _tool_calls_list,
        [
            ("<tool_calls>[]</tool_calls>", "<tool_calls>[]</tool_calls>", []),
            ("<tool_calls>oops</tool_calls>", "<tool_calls>oops</tool_calls>", []),
            ('<tool_calls>[{"name": "f", "arguments": "{\\"a\\": 1}"}]</tool_calls>', "", [("f", {"a": 1})]),
            # Jamba's (`jamba`, the same parser): two calls in one list; an object without a name is text
            ('<tool_calls>[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]</tool_calls>', "",
             [("f", {"a": 1}), ("g", {})]),
            ('<tool_calls>[{"arguments": {}}]</tool_calls>', '<tool_calls>[{"arguments": {}}]</tool_calls>', []),
        ],
    )  # fmt: skip


def longcat_cases():
    def render(calls, i):
        return "\n".join(f"<longcat_tool_call>\n{_j(o, i)}\n</longcat_tool_call>" for o in _objects(calls, i))

    return _table(
        render,
        [
            ("<longcat_tool_call>oops</longcat_tool_call>", "<longcat_tool_call>oops</longcat_tool_call>", []),
            ('<tool_call>{"name": "f", "arguments": {}}</tool_call>', '<tool_call>{"name": "f", "arguments": {}}'
             "</tool_call>", []),  # hermes' tag is text here
        ],
    )  # fmt: skip


def minimax_cases():
    def render(calls, i):
        return "<tool_calls>\n" + "".join(_j(o, i) + "\n" for o in _objects(calls, i)) + "</tool_calls>"

    return _table(
        render,
        [
            ('<tool_calls>\n{"name": "f", "arguments": {}}\n{"name": "g"}\n</tool_calls>', "", [("f", {}), ("g", {})]),
            ('<tool_calls>\n{"name": "f", "arguments": {}}\nnot json\n</tool_calls>',
             '<tool_calls>\n{"name": "f", "arguments": {}}\nnot json\n</tool_calls>', []),
        ],
    )  # fmt: skip


def qwen25_coder_cases():
    def render(calls, i):
        wrap = [("<tool_call>\n", "\n</tool_call>"), ("<tools>\n", "\n</tools>"), ("```json\n", "\n```")][i % 3]
        return "\n".join(wrap[0] + _j(o, i) + wrap[1] for o in _objects(calls, i))

    return _table(
        render,
        [
            ('```json\n{"result": 42}\n```', '```json\n{"result": 42}\n```', []),  # JSON that is not a call
            ('<tools>[{"name": "f", "arguments": {}}]</tools>', "", [("f", {})]),
            ("```python\nprint(1)\n```", "```python\nprint(1)\n```", []),
        ],
    )  # fmt: skip


def _py(args: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def gemma_cases():
    def fg_value(v):
        return f"<escape>{v}<escape>" if isinstance(v, str) else json.dumps(v, ensure_ascii=False)

    def render(calls, i):
        if i % 2:
            return "```tool_code\n[" + ", ".join(f"{n}({_py(a)})" for n, a in calls) + "]\n```"
        return "".join(
            f"<start_function_call>call:{n}{{" + ",".join(f"{k}:{fg_value(v)}" for k, v in a.items()) + "}"
            "<end_function_call>"
            for n, a in calls
        )

    return _table(
        render,
        [
            ('```tool_code\nprint(get_weather(city="Oslo"))\n```', "", [("get_weather", {"city": "Oslo"})]),
            ("```tool_code\nx = 1\n```", "```tool_code\nx = 1\n```", []),
            ("<start_function_call>call:f{a:<escape>x, y<escape>}<end_function_call>", "", [("f", {"a": "x, y"})]),
            ("<start_function_call>nonsense<end_function_call>", "<start_function_call>nonsense<end_function_call>",
             []),
            # vLLM's readings: no comma needed after a quoted value; a quoted value is JSON unless the schema
            # makes it a string
            ("<start_function_call>call:get_weather{city:<escape>NYC<escape>unit:<escape>celsius<escape>}"
             "<end_function_call>", "", [("get_weather", {"city": "NYC", "unit": "celsius"})]),
            ("<start_function_call>call:other{count:<escape>42<escape>,on:<escape>true<escape>,z:<escape>007<escape>}"
             "<end_function_call>", "", [("other", {"count": 42, "on": True, "z": "007"})]),
            ("<start_function_call>call:zip{code:<escape>42<escape>,n:<escape>2.5<escape>}<end_function_call>", "",
             [("zip", {"code": "42", "n": 2.5})]),
        ],
    )  # fmt: skip


def _g4(value) -> str:
    """A value as Gemma 4's chat template writes an argument (`format_argument`)."""
    if isinstance(value, str):
        return f'<|"|>{value}<|"|>'
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_g4(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(map(_g4, value)) + "]"
    return json.dumps(value)


def gemma4_cases():
    def render(calls, i):
        return "".join(f"<|tool_call>call:{n}{_g4(a)}<tool_call|>" for n, a in calls)

    return _table(
        render,
        [
            ('<|tool_call>call:f{a:<|"|>x, y: {z}<|"|>}<tool_call|>', "", [("f", {"a": "x, y: {z}"})]),
            ('<|tool_call>call:f{<|"|>odd key<|"|>:1}<tool_call|>', "", [("f", {"odd key": 1})]),
            ("<|tool_call>nonsense<tool_call|>", "<|tool_call>nonsense<tool_call|>", []),
            (
                "<|tool_call>call:f{k:,n:108.,z:null}<tool_call|>",
                "",
                [("f", {"k": "", "n": 108.0, "z": None})],
            ),  # vLLM's reading
            ('<|tool_call>:call:f{a:<|"|>x<|"|>}<turn|>', "", [("f", {"a": "x"})]),  # a stray colon; the turn ends it
            ('call:f{a:<|"|>x}<|"|>}', "", [("f", {"a": "x}"})]),  # bare, at the start of the content (vLLM)
            ("\n call:f{} then", " then", [("f", {})]),
            ("calling: you", "calling: you", []),
            ("Hi call:f{}", "Hi call:f{}", []),  # bare only at the start
            ('<|tool_call>call:f{a:<|"|>open}<tool_call|>', '<|tool_call>call:f{a:<|"|>open}<tool_call|>', []),
        ],
    )


def harmony_tool_cases():
    def call(n, a, i):
        return f"{H[1]}commentary to=functions.{n} {H[5]}json{H[2]}{_j(a, i)}{H[4]}"

    def render(calls, i):
        return H[0].join(call(n, a, i) for n, a in calls)

    def preamble(text):
        return f"{H[1]}commentary{H[2]}{text}{H[3]}{H[0]}" if text else ""

    cases = []
    for i, (args, lead) in enumerate(itertools.product(ARGS, CONTENT)):
        name = NAMES[i % len(NAMES)]
        cases.append((preamble(lead) + render([(name, args)], i), lead, [(name, args)]))
    return cases + [
        (render(TWO, 0), "", TWO),
        (f"{H[1]}final{H[2]}Just text.", "Just text.", []),
        (f"{H[1]}analysis{H[2]}hmm{H[3]}{H[0]}{H[1]}final{H[2]}ok", "hmmok", []),  # no reasoning parser: content
        (f"{H[0]} to=functions.f{H[1]}commentary json{H[2]}{{}}{H[4]}", "", [("f", {})]),  # recipient in the role
        (f"{H[1]}commentary to=functions.f {H[5]}json{H[2]}{{bad", "{bad", []),
        (f"{H[1]}commentary to=functions.f {H[5]}json{H[2]}{{\"a\": 1}}", "", [("f", {"a": 1})]),  # <|call|> is EOS
        ("plain", "plain", []),
        ("", "", []),
        (f"{H[1]}final{H[2]}a{H[3]}", "a", []),
    ]  # fmt: skip
