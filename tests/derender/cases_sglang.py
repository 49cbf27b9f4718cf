"""Formats only SGLang names, written from its detectors and the models' documented tool formats (output,
expected content, expected calls), and the reasoning formats they add."""

from __future__ import annotations

import itertools

from tests.derender.case_kit import CONTENT, TWO, _j, _table, _text
from tests.derender.cases_reasoning import think_family
from tests.derender.parser_cases import ARGS, NAMES

TC = ("<tool_call>", "</tool_call>")


def _telechat4_body(name: str, args: dict, i: int) -> str:
    """The three bodies SGLang's TeleChat4Detector reads, in turn: JSON, tag pairs, a name then its object."""
    if i % 3 == 0:
        return _j({"name": name, "arguments": args}, i)
    if i % 3 == 1:
        sep = "\n" if i % 2 else ""
        pairs = "".join(
            f"{sep}<param_key>{k}</param_key>{sep}<param_value>{_text(v)}</param_value>" for k, v in args.items()
        )
        return name + pairs + sep
    return name + _j(args, i)


def telechat4_cases():
    def render(calls, i):
        return "".join(f"{TC[0]}{_telechat4_body(n, a, i + j)}{TC[1]}" for j, (n, a) in enumerate(calls))

    return _table(render, [
        ('<tool_call>{"name": "get_weather", "arguments": {"city": "Beijing"}}</tool_call>', "",
         [("get_weather", {"city": "Beijing"})]),
        ("<tool_call>\nget_weather\n<param_key>city</param_key>\n<param_value>Beijing</param_value>\n</tool_call>", "",
         [("get_weather", {"city": "Beijing"})]),
        (f"{TC[0]}zip<param_key> code </param_key><param_value> 007 </param_value><param_key>n</param_key>"
         f"<param_value>1.5</param_value><param_key>on</param_key><param_value>true</param_value>{TC[1]}", "",
         [("zip", {"code": "007", "n": 1.5, "on": True})]),  # typed by the schema, stripped (SGLang)
        (f"{TC[0]}g<param_key>k</param_key><param_value>[1, 2]</param_value>{TC[1]}", "", [("g", {"k": [1, 2]})]),
        (f'{TC[0]}f{{"arguments": {{"a": 1}}}}{TC[1]}', "", [("f", {"a": 1})]),
        (f"{TC[0]}f {{'a': 'b'}}{TC[1]}", "", [("f", {"a": "b"})]),  # a Python literal (SGLang's ast fallback)
        (f"{TC[0]} get_weather {TC[1]}", "", [("get_weather", {})]),
        (f"{TC[0]}not a call{TC[1]}", f"{TC[0]}not a call{TC[1]}", []),
        (f"{TC[0]}f<param_key>a</param_key>stray<param_value>1</param_value>{TC[1]}",
         f"{TC[0]}f<param_key>a</param_key>stray<param_value>1</param_value>{TC[1]}", []),
        (f"{TC[0]}f{{oops{TC[1]}", f"{TC[0]}f{{oops{TC[1]}", []),
        (f'{TC[0]}{{"name": "f", "arguments": {{}}}}', f'{TC[0]}{{"name": "f", "arguments": {{}}}}', []),  # cut
        (f'Plan: {TC[0]}a{{"x": 1}}{TC[1]}\n{TC[0]}b<param_key>s</param_key><param_value>t</param_value>{TC[1]}',
         "Plan: ", [("a", {"x": 1}), ("b", {"s": "t"})]),
    ])  # fmt: skip


def spark_cases():
    def render(calls, i):
        sep = "\n" if i % 2 else ""  # Spark3Detector's wire: the name, then pairs, on lines of their own
        return "".join(
            TC[0]
            + n
            + sep
            + "".join(f"<arg_key>{k}</arg_key><arg_value>{_text(v)}</arg_value>{sep}" for k, v in a.items())
            + TC[1]
            for n, a in calls
        )

    return _table(render, [
        (f"{TC[0]}other\n<arg_key>n</arg_key><arg_value>12</arg_value>\n{TC[1]}", "", [("other", {"n": "12"})]),
        (f"{TC[0]}zip<arg_key>on</arg_key><arg_value>1</arg_value>{TC[1]}", "", [("zip", {"on": True})]),
        (f"{TC[0]}zip<arg_key>code</arg_key><arg_value> 007</arg_value>{TC[1]}", "", [("zip", {"code": " 007"})]),
        (f"{TC[0]}f<arg_key>a</arg_key><arg_value>1</arg_value>", f"{TC[0]}f<arg_key>a</arg_key><arg_value>1</arg_value>",
         []),  # cut
    ])  # fmt: skip


def glm53_cases():
    """GLM-5.3-Flash (SGLang's glm53): `name>{json}` calls with no closer, or GLM's pairs in a closed block."""

    def render(name, args, i):
        if i % 2 == 0 or not args:
            return f"{TC[0]}{name}{'>' if i % 4 else chr(10)}{_j(args, i)}"
        pairs = "".join(f"\n<arg_key>{k}</arg_key>\n<arg_value>{_text(v)}</arg_value>" for k, v in args.items())
        return f"{TC[0]}{name}{pairs}\n{TC[1]}"

    cases = []
    for i, (args, lead) in enumerate(itertools.product(ARGS, CONTENT)):
        call = [(NAMES[i % len(NAMES)], args)]
        cases.append((lead + render(*call[0], i), lead, call))
    return cases + [
        (render("a", {"x": 1}, 0) + render("b", {"y": [2], "s": "t"}, 1), "", TWO),
        (render("a", {"x": 1}, 0) + "\n" + render("b", {"y": [2], "s": "t"}, 2) + " after", " after", TWO),
        (f'{TC[0]}Weather/get_weather>{{"city": "北京"}}', "", [("get_weather", {"city": "北京"})]),  # SGLang's cases
        (f'{TC[0]}LOOKUP_USER_2>{{"id": 1}}', "", [("lookup_user_2", {"id": 1})]),
        (f'{TC[0]}not_a_tool>{{"x": 1}}{TC[0]}zip>{{"code": "9"}}', "", [("zip", {"code": "9"})]),  # unresolved: dropped
        (f'{TC[0]}search>here: {{"q": "x"}} thanks', " thanks", [("search", {"q": "x"})]),
        (f"{TC[0]}search<arg_key>q=hello</arg_value>{TC[1]}", "", [("search", {"q": "hello"})]),  # the short pairs
        (f'{TC[0]}search>{{"q": "x"}}{TC[1]}', "", [("search", {"q": "x"})]),
        (f'{TC[0]}search>{{"q": "x', f'{TC[0]}search>{{"q": "x', []),  # cut
        (f"{TC[0]}search<arg_key>q</arg_key><arg_value>x</arg_value>", f"{TC[0]}search<arg_key>q</arg_key>"
         "<arg_value>x</arg_value>", []),
        (f"{TC[0]}no name or json", f"{TC[0]}no name or json", []),
        ("<![get_weather>{}", "<![get_weather>{}", []),
    ]  # fmt: skip


TOOL_FORMATS = {"telechat4": telechat4_cases, "spark": spark_cases, "glm53": glm53_cases}

REASONING_FORMATS = {
    # SGLang's TeleChat4Detector: <think> tags, no tool opener ends the block (force_nonempty_content: nonempty.py)
    "telechat4": think_family(extra=[
        ("<think>plan<tool_call>f</tool_call>", False, "plan<tool_call>f</tool_call>", ""),
        ("plan</think>\n\nAnswer", True, "plan", "\n\nAnswer"),
    ]),
}  # fmt: skip
