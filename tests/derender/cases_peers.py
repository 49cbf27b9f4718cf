"""Tool formats only llama.cpp or SGLang name (Functionary, Nemotron v2, Solar Open, MiroThinker; SGLang's trinity,
gigachat35, iquest_q1), written from llama.cpp's test-chat.cpp and SGLang's detectors: (output, expected content,
expected calls), and the reasoning formats they add."""

from __future__ import annotations

import itertools
import json

from tests.derender.case_kit import CONTENT, TWO, _j, _objects, _table, _text
from tests.derender.cases_reasoning import think_family
from tests.derender.cases_tagged import _dsml
from tests.derender.parser_cases import ARGS, NAMES


def functionary_v3_1_cases():
    return _table(
        lambda calls, i: "".join(f"<function={n}>{_j(a, i)}</function>" for n, a in calls),
        [
            ('<function=special_function>{"arg1": 1}', "", [("special_function", {"arg1": 1})]),  # cut: JSON whole
            ("Run it: <|python_tag|>print('hey')\n", "Run it: ", [("python", {"code": "print('hey')\n"})]),
            ("<function=f>not json</function>", "<function=f>not json</function>", []),
            ("<function=a b>{}</function>", "<function=a b>{}</function>", []),  # the name is one word
            ('<function=f>{"s": "</function>"}</function>', "", [("f", {"s": "</function>"})]),
        ],
    )  # fmt: skip


def functionary_v3_2_cases():
    def render(calls, i):
        return "".join((">>>" if j else "") + f"{n}\n{_j(a, i)}" + "\n" * (i % 2) for j, (n, a) in enumerate(calls))

    cases = []
    for i, (args, lead) in enumerate(itertools.product(ARGS, CONTENT)):
        call = [(NAMES[i % len(NAMES)], args)]
        cases.append(((f"all\n{lead}>>>" if lead else "") + render(call, i), lead, call))  # `all` carries content
    cases += [(render(TWO, 0), "", TWO), (f"all\nDone. >>>{render(TWO, 1)}", "Done. ", TWO)]
    return cases + [
        ("all\nHello, world!\nnono\nWhat's up?>>>special_function\n{\"arg1\": 1}\n", "Hello, world!\nnono\nWhat's up?",
         [("special_function", {"arg1": 1})]),
        ("python\n# This is a program:\nprint('hey')", "", [("python", {"code": "# This is a program:\nprint('hey')"})]),
        ('special_function\n{"arg1": 1} \n          ', "", [("special_function", {"arg1": 1})]),
        ("all\nHello, world!", "Hello, world!", []),
        ("Hello, world!", "Hello, world!", []),  # no recipient line: content
        ("f\nnot json>>>all\nok", "f\nnot jsonok", []),
        ('all\nx>>>f\n{"s": ">>>"}', "x", [("f", {"s": ">>>"})]),
    ]  # fmt: skip


TC = ("<TOOLCALL>", "</TOOLCALL>")


def nemotron_v2_cases():
    return _table(
        lambda calls, i: TC[0] + _j(_objects(calls, i), i) + TC[1],
        [
            (f"{TC[0]}oops{TC[1]}", f"{TC[0]}oops{TC[1]}", []),
            (f'{TC[0]}[{{"name": "f", "arguments": "{{\\"a\\": 1}}"}}]{TC[1]}', "", [("f", {"a": 1})]),
        ],
    )  # fmt: skip


def trinity_cases():
    def render(calls, i):
        blocks = "".join(f"<tool_call>\n{_j(o, i)}\n</tool_call>" for o in _objects(calls, i))
        return f"<think>{blocks}</think>" if i % 2 else blocks

    return _table(
        render,
        [
            ('<think>plan <tool_call>{"name": "f", "arguments": {}}</tool_call></think>done', "plan done",
             [("f", {})]),
            ("<tool_call>oops</tool_call>", "<tool_call>oops</tool_call>", []),
        ],
    )  # fmt: skip


G = "｜GCML｜"


def gigachat35_cases():
    return _table(
        _dsml("tool_calls", G),
        [
            (f'<{G}tool_calls>\n<{G}invoke name="f">\n<{G}parameter name="a" string="false">oops</{G}parameter>\n'
             f"</{G}invoke>\n</{G}tool_calls>", "", [("f", {"a": "oops"})]),  # not JSON: text (SGLang)
            (f"<{G}tool_calls>\nnothing\n</{G}tool_calls>", f"<{G}tool_calls>\nnothing\n</{G}tool_calls>", []),
        ],
    )  # fmt: skip


IQ = ("<iquest_tool_call>", "</iquest_tool_call>")


def iquest_q1_cases():
    def render(calls, i):
        return "".join(
            f"{IQ[0]}{n}\n"
            + "".join(f"<arg_key>{k}</arg_key><arg_value>{_text(v)}</arg_value>" for k, v in a.items())
            + IQ[1]
            for n, a in calls
        )

    return _table(
        render,
        [
            (f"{IQ[0]}zip<arg_key>code</arg_key><arg_value>007</arg_value>{IQ[1]}", "", [("zip", {"code": "007"})]),
            (f"{IQ[0]}f\nstray{IQ[1]}", f"{IQ[0]}f\nstray{IQ[1]}", []),  # only argument pairs in the body
            ("<tool_call>f</tool_call>", "<tool_call>f</tool_call>", []),
        ],
    )  # fmt: skip


SO = ("<|tool_call:begin|>", "<|tool_call:name|>", "<|tool_call:args|>", "<|tool_call:end|>")


def solar_open_cases():
    def render(calls, i):
        body = "".join(f"{SO[0]}{j}{SO[1]}{n}{SO[2]}{_j(a, i)}{SO[3]}" for j, (n, a) in enumerate(calls))
        return f"<|tool_calls|>{body}<|calls|>"

    return _table(
        render,
        [
            (f"<|content|>Let me check.\n<|end|><|begin|>assistant<|tool_calls|>{SO[0]}0{SO[1]}f{SO[2]}{{}}{SO[3]}",
             "Let me check.\n", [("f", {})]),
            ("<|content|>If a < b, use {x} or [y].\n", "If a < b, use {x} or [y].\n", []),
            (f"{SO[0]}0{SO[1]}f{SO[2]}oops{SO[3]}", f"{SO[0]}0{SO[1]}f{SO[2]}oops{SO[3]}", []),
        ],
    )  # fmt: skip


def mirothinker_cases():
    def render(calls, i):
        body = "".join(
            f"\n<server_name>s{j}</server_name>\n<tool_name>{n}</tool_name>\n<arguments>\n{_j(a, i)}\n</arguments>"
            for j, (n, a) in enumerate(calls)
        )
        return f"<use_mcp_tool>{body}\n</use_mcp_tool>"

    return _table(
        render,
        [
            ("<use_mcp_tool><tool_name>f</tool_name><arguments>{}</arguments></use_mcp_tool>", "", [("f", {})]),
            ("<use_mcp_tool>\n<tool_name>f</tool_name>\n<arguments>\nnot json\n</arguments>\n</use_mcp_tool>",
             "<use_mcp_tool>\n<tool_name>f</tool_name>\n<arguments>\nnot json\n</arguments>\n</use_mcp_tool>", []),
        ],
    )  # fmt: skip


def generic_cases():
    """llama.cpp's generic format: the whole output is one JSON object (test-chat.cpp's shapes)."""
    layouts = [
        lambda calls, i: {"tool_call": _objects(calls, i)[0]},
        lambda calls, i: {"tool_calls": _objects(calls, i)},
        lambda calls, i: {"tool_calls": [{**o, "id": f"call_{j}"} for j, o in enumerate(_objects(calls, i))]},
        lambda calls, i: {"tool_call": {"arguments": calls[0][1], "name": calls[0][0]}},
    ]
    cases = []
    for i, (args, layout) in enumerate(itertools.product(ARGS, layouts)):
        call = [(NAMES[i % len(NAMES)], args)]
        cases.append(
            (
                (" " if i % 3 else "") + json.dumps(layout(call, i), indent=2 * (i % 2), ensure_ascii=i % 2 == 0),
                "",
                call,
            )
        )
    return cases + [
        (json.dumps({"tool_calls": _objects(TWO, 0)}), "", TWO),
        ('{\n  "response": "Hello, world!\\nWhat\'s up?"\n}', "Hello, world!\nWhat's up?", []),
        ('{"response": {"a": [1], "b": "é"}}', '{\n  "a": [\n    1\n  ],\n  "b": "é"\n}', []),
        ('{"tool_calls": []}', "", []),
        ("Hello, plain text {not json}", "Hello, plain text {not json}", []),
        ('{"other": 1}', '{"other": 1}', []),
        ('{"response": "x"} trailing', '{"response": "x"} trailing', []),
        ('{"tool_call": {"arguments": {}}}', '{"tool_call": {"arguments": {}}}', []),  # no name: content (llama.cpp)
        ('{"tool_call": {"name": "f", "arguments": {', '{"tool_call": {"name": "f", "arguments": {', []),  # cut
        ("", "", []),
    ]  # fmt: skip


TOOL_FORMATS = {
    "generic": generic_cases,
    "functionary_v3_1": functionary_v3_1_cases,
    "functionary_v3_2": functionary_v3_2_cases,
    "nemotron_v2": nemotron_v2_cases,
    "trinity": trinity_cases,
    "gigachat35": gigachat35_cases,
    "iquest_q1": iquest_q1_cases,
    "solar_open": solar_open_cases,
    "mirothinker": mirothinker_cases,
}

B, E = "Here are my reasoning steps:\n", "[BEGIN FINAL RESPONSE]"
REASONING_FORMATS = {
    "apertus2509": think_family("<|inner_prefix|>", "<|inner_suffix|>", extra=[
        ("<|inner_prefix|>plan<|tools_prefix|>[]", False, "plan", "<|tools_prefix|>[]"),
    ]),
    "nemotron_v2": think_family(extra=[("<think>plan<TOOLCALL>[]", False, "plan", "<TOOLCALL>[]")]),
    "apriel": think_family(B, E, forced=True, extra=[
        (f"plan\n{E}\nThe answer.\n[END FINAL RESPONSE]", True, "plan\n", "\nThe answer."),
        ("plan<tool_calls>[]</tool_calls>", False, "plan", "<tool_calls>[]</tool_calls>"),
    ]),
    "solar_open": think_family("<|think|>", "<|end|>", extra=[
        ("<|think|>plan<|end|><|begin|>assistant<|content|>Hi.<|end|>", False, "plan", "Hi."),
        ("<|content|>No thinking.<|end|>", False, "", "No thinking."),
        ("<|think|>plan<|tool_calls|><|tool_call:begin|>", False, "plan", "<|tool_calls|><|tool_call:begin|>"),
    ]),
}  # fmt: skip
