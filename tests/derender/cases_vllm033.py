"""Formats vLLM 0.33 added, written from its parsers' documented wire formats and the models' renderers: tool
cases (output, expected content, expected calls) and reasoning cases (output, started, reasoning, content)."""

from __future__ import annotations

import itertools
import json

from tests.derender.case_kit import CONTENT, TWO, _j, _table, _text
from tests.derender.cases_reasoning import _reasoning, think_family
from tests.derender.parser_cases import ARGS, NAMES


def _pairs(args: dict, key: str, value: str, sep: str = "") -> str:
    return "".join(f"<{key}>{k}</{key}>{sep}<{value}>{_text(v)}</{value}>{sep}" for k, v in args.items())


def hy_v3_cases():
    def render(calls, i):
        sep = "\n" if i % 2 else ""
        inner = "".join(
            f"<tool_call>{n}<tool_sep>{sep}{_pairs(a, 'arg_key', 'arg_value', sep)}</tool_call>" for n, a in calls
        )
        return f"<tool_calls>{inner}</tool_calls>"

    return _table(render, [
        ("<tool_calls><tool_call>zip<tool_sep><arg_key>code</arg_key><arg_value>01234</arg_value></tool_call>"
         "</tool_calls>", "", [("zip", {"code": "01234"})]),
        ("<tool_calls><tool_call>f<tool_sep></tool_call></tool_calls>", "", [("f", {})]),
        ("<tool_calls><tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call></tool_calls>",
         "<tool_calls><tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call></tool_calls>", []),
        ("<tool_call>f<tool_sep></tool_call>", "<tool_call>f<tool_sep></tool_call>", []),  # only inside the group
        ("<tool_calls:6124c78e><tool_call:6124c78e>f<tool_sep:6124c78e></tool_call:6124c78e></tool_calls:6124c78e> "
         "a < b", " a < b", [("f", {})]),  # a checkpoint's suffixed tags
    ])  # fmt: skip


def hy_v4_cases():
    def render(calls, i):
        inner = "".join(f"<tool_call>{n}{_pairs(a, 'arg_key', 'arg_value')}</tool_call>" for n, a in calls)
        return f"<tool_calls>{inner}</tool_calls>"

    return _table(render, [
        ("<tool_calls><tool_call>get_time</tool_call></tool_calls>", "", [("get_time", {})]),
        ("<tool_calls><tool_call>f<arg_key>a</arg_key>stray</tool_call></tool_calls>",
         "<tool_calls><tool_call>f<arg_key>a</arg_key>stray</tool_call></tool_calls>", []),
        ("<tool_calls><tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value>",
         "<tool_calls><tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value>", []),  # cut off
    ])  # fmt: skip


def k2_horizon_cases():
    def render(calls, i):
        if i % 3 == 2:
            inner = "".join(f"<ifm|tool_call>{_j({'name': n, 'arguments': a}, i)}</ifm|tool_call>" for n, a in calls)
        else:
            typed = i % 3 == 1
            inner = "".join(
                f"<ifm|tool_call>{n}"
                + "".join(
                    f"<ifm|arg_key>{k}</ifm|arg_key>"
                    + (f"<ifm|arg_type>{_kind(v)}</ifm|arg_type>" if typed else "")
                    + f"<ifm|arg_value>{_text(v)}</ifm|arg_value>"
                    for k, v in a.items()
                )
                + "</ifm|tool_call>"
                for n, a in calls
            )
        return f"<ifm|tool_calls>{inner}</ifm|tool_calls>"

    G = ("<ifm|tool_calls>", "</ifm|tool_calls>")
    return _table(render, [
        (f"{G[0]}<ifm|tool_call>other<ifm|arg_key>n</ifm|arg_key><ifm|arg_type>integer</ifm|arg_type>"
         f"<ifm|arg_value> 12 </ifm|arg_value></ifm|tool_call>{G[1]}", "", [("other", {"n": 12})]),
        (f"{G[0]}<ifm|tool_call>f</ifm|tool_call><ifm|tool_call>bad name</ifm|tool_call>{G[1]}",
         f"{G[0]}<ifm|tool_call>f</ifm|tool_call><ifm|tool_call>bad name</ifm|tool_call>{G[1]}", []),  # all or none
        (f"{G[0]}<ifm|tool_call>f</ifm|tool_call>", f"{G[0]}<ifm|tool_call>f</ifm|tool_call>", []),
    ])  # fmt: skip


def _kind(value) -> str:
    return {str: "string", bool: "boolean", int: "integer", float: "number", list: "array"}.get(type(value), "object")


P = (
    "<|plamo:begin_tool_requests:plamo|>", "<|plamo:end_tool_requests:plamo|>", "<|plamo:begin_tool_request:plamo|>",
    "<|plamo:end_tool_request:plamo|>", "<|plamo:begin_tool_name:plamo|>", "<|plamo:end_tool_name:plamo|>",
    "<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>", "<|plamo:end_tool_arguments:plamo|>",
)  # fmt: skip


def plamo3_cases():
    def render(calls, i):
        inner = "".join(f"{P[2]}{P[4]}{n}{P[5]}{P[6]}{_j(a, i)}{P[7]}{P[3]}" for n, a in calls)
        return f"{P[0]}{inner}{P[1]}"

    return _table(render, [
        (f"{P[0]}{P[2]}{P[4]}f{P[5]}{P[6]}[1]{P[7]}{P[3]}{P[1]}", f"{P[0]}{P[2]}{P[4]}f{P[5]}{P[6]}[1]{P[7]}{P[3]}{P[1]}",
         []),
        (f"{P[0]}{P[2]}{P[4]}f{P[5]}{P[6]}{{\"a\": 1}}{P[7]}", f"{P[0]}{P[2]}{P[4]}f{P[5]}{P[6]}{{\"a\": 1}}{P[7]}", []),
    ])  # fmt: skip


def cohere_cases():
    def render(calls, i):
        objs = [{"tool_call_id": str(k), "tool_name": n, "parameters": a} for k, (n, a) in enumerate(calls)]
        return f"<|START_ACTION|>{_j(objs, i)}<|END_ACTION|>"

    return _table(render, [
        ('<|START_ACTION|>[{"tool_name": "f"}]<|END_ACTION|>', "", [("f", {})]),
        ("<|START_ACTION|>[bad]<|END_ACTION|>", "<|START_ACTION|>[bad]<|END_ACTION|>", []),
        ('<|START_ACTION|>[{"tool_name": "f", "parameters": {"a": 1}}, 3]<|END_ACTION|>',
         '<|START_ACTION|>[{"tool_name": "f", "parameters": {"a": 1}}, 3]<|END_ACTION|>', []),
    ])  # fmt: skip


def minicpm5_cases():
    def render(calls, i):
        def param(k, v):
            text = _text(v)
            return f'<param name="{k}">' + (f"<![CDATA[{text}]]>" if i % 4 == 1 else text) + "</param>"

        return "\n".join(f'<function name="{n}">' + "".join(param(k, v) for k, v in a.items()) + "</function>"
                         for n, a in calls)  # fmt: skip

    return _table(render, [
        ('<function name="other"><param name="n"> 12\n</param><param name="s">"x"</param></function>', "",
         [("other", {"n": 12, "s": "x"})]),  # no schema: JSON, else a Python literal, else text
        ('<function name="f"><arguments><param name="a">1</param></arguments></function>', "", [("f", {"a": 1})]),
        ('<function name="f"><param>1</param></function>', '<function name="f"><param>1</param></function>', []),
        ('<function name="f"><param name="a">1</param>', '<function name="f"><param name="a">1</param>', []),
    ])  # fmt: skip


def _channels(render, extra) -> list:
    """ARGS x content prefixes, two calls, text after; for the channel formats, whose text between blocks is content."""
    cases = []
    for i, (args, lead) in enumerate(itertools.product(ARGS, CONTENT)):
        name = NAMES[i % len(NAMES)]
        cases.append((lead + render([(name, args)], i), lead, [(name, args)]))
    cases += [
        (render(TWO, 0), "", TWO),
        (render(TWO, 1) + " after", " after", TWO),
        ("no tools here", "no tools here", []),
    ]
    return cases + extra


INK = (
    "<|message_model|>",
    "<|content_text|>",
    "<|content_thinking|>",
    "<|content_invoke_tool_json|>",
    "<|end_message|>",
)


def inkling_cases():
    def render(calls, i):
        return "".join(f"{INK[0]}{n}{INK[3]}{json.dumps({'name': n, 'args': a}, ensure_ascii=i % 2 == 0)}{INK[4]}"
                       for n, a in calls)  # fmt: skip

    return _channels(render, [
        (f"{INK[2]}plan{INK[4]}{INK[0]}{INK[1]}Hi{INK[4]}", "Hi", []),  # alone, the tool parser drops the thinking
        (f"{INK[3]}{{bad{INK[4]}", f"{INK[3]}{{bad{INK[4]}", []),
        (f'{INK[3]}{{"name": "f", "arguments": {{"a": 1}}}}', "", [("f", {"a": 1})]),  # the end token was eaten by EOS
        (f'{INK[3]}{{"args": {{}}}}{INK[4]}', f'{INK[3]}{{"args": {{}}}}{INK[4]}', []),
        (f"{INK[0]}{INK[1]}Sure.{INK[4]}{INK[0]}f{INK[3]}{{\"name\": \"f\"}}{INK[4]}", "Sure.", [("f", {})]),
        (f"{INK[0]}<|content_tool_error|>oops{INK[4]}", "oops", []),
        ("", "", []),
    ])  # fmt: skip


U = ("<|start|>assistant", "<|message|>", "<|eom|>", "<|eot|>")


def _atem(calls) -> str:
    return "".join(
        f'{U[0]} to={n}{U[1]}<atem:function_calls>\n<atem:invoke name="{n}">\n'
        + "".join(f'<atem:parameter name="{k}">{_text(v)}</atem:parameter>\n' for k, v in a.items())
        + f"</atem:invoke>\n</atem:function_calls>{U[2]}"
        for n, a in calls
    )


def muse_cases():
    return _channels(lambda calls, i: _atem(calls), [
        (f" to=self{U[1]}plan{U[2]}{U[0]} to=user{U[1]}Hi{U[3]}", "Hi", []),  # alone, the reasoning is dropped
        (f" to=self{U[1]}plan to=f{U[1]}<atem:invoke name=\"f\"></atem:invoke>{U[2]}", "", [("f", {})]),
        (f"{U[0]} to=f.f{U[1]}<atem:invoke name=\"f.f\"></atem:invoke>{U[2]}", "", [("f", {})]),
        (f"{U[0]} to=f{U[1]}<atem:invoke name=\"f\">{U[2]}", "<atem:invoke name=\"f\">", []),
        (f"{U[0]} to=zip{U[1]}<atem:invoke name=\"zip\"><atem:parameter name=\"code\">01234</atem:parameter>"
         f"</atem:invoke>{U[2]}", "", [("zip", {"code": "01234"})]),  # a string parameter keeps its text
    ])  # fmt: skip


def muse_glimmer_cases():
    return _channels(lambda calls, i: _atem(calls), [
        (f"{U[0]} to=zip{U[1]}<atem:invoke name=\"zip\"><atem:parameter name=\"code\">7</atem:parameter>"
         f"</atem:invoke>{U[2]}", "", [("zip", {"code": 7})]),  # Glimmer decodes every value
        (f"{U[0]} to=f{U[1]}no invoke{U[2]}", "no invoke", []),
        (f"{U[0]} to=f{U[1]}<atem:invoke name=\"f\"><atem:parameter name=\"s\">[1]</atem:parameter></atem:invoke>{U[2]}",
         "", [("f", {"s": [1]})]),
        (f" to=self{U[1]}p{U[2]}{U[0]} to=user{U[1]}Hi{U[3]}", "Hi", []),
        (f" to=commentary{U[1]}status{U[2]}{U[0]} to=user{U[1]}Hi{U[3]}", "Hi", []),
    ])  # fmt: skip


def _muse_reasoning(extra) -> list:
    return _reasoning(
        lambda r, c: f" to=self{U[1]}{r}{U[2]}{U[0]} to=user{U[1]}{c}{U[3]}",
        lambda r, c: f"{r}{U[2]}{U[0]} to=user{U[1]}{c}{U[3]}",
        [
            (f" to=self{U[1]}cut off", False, "cut off", ""),
            ("unframed text", False, "", "unframed text"),
            (f" to=self{U[1]}p{U[2]}{U[0]} to=f{U[1]}x{U[2]}", False, "p", f"{U[0]} to=f{U[1]}x{U[2]}"),
            (f" to=developer{U[1]}hidden{U[2]}{U[0]} to=user{U[1]}shown{U[3]}", False, "", "shown"),
            *extra,
        ],
    )


DROP = "<|im_end|>"


def reasoning_cases() -> dict:
    return {
        "granite_thinking_parser": [(t, s, r, c.lstrip("\n")) for t, s, r, c in think_family(extra=[
            ("<think>plan\n</think>\n\nAnswer", False, "plan\n", "Answer"),
            ("<think>plan</think>\n\n", False, "plan", ""),
            ("<think>plan<tool_call>\n<function=f>", False, "plan", "<tool_call>\n<function=f>"),
        ])],  # the template's newlines after </think> are not content
        "hy_v3": think_family(extra=[("<think:6124c78e>plan</think:6124c78e>x <", False, "plan", "x <")]),
        "hy_v4": think_family(forced=True, extra=[("plan</think:ab>\n<tool_calls:ab>", False, "plan", "\n<tool_calls>")]),
        "k2_horizon": think_family("<ifm|think>", "</ifm|think>", forced=True, extra=[
            ("<ifm|think_fast>quick</ifm|think_fast>done", False, "quick", "done"),
            ("plan<ifm|tool_calls><ifm|tool_call>f", False, "plan", "<ifm|tool_calls><ifm|tool_call>f"),
        ]),
        "plamo3": think_family("<|plamo:begin_think:plamo|>", "<|plamo:end_think:plamo|>", forced=True, extra=[
            (f"plan{P[0]}{P[2]}", False, "plan", f"{P[0]}{P[2]}"),
            ("cut short<|plamo:tag|>", False, "cut short", ""),
        ]),
        "cohere_command3": think_family("<|START_THINKING|>", "<|END_THINKING|>", extra=[
            ("<|START_THINKING|>p<|END_THINKING|><|START_RESPONSE|>Hi<|END_RESPONSE|>", False, "p", "Hi"),
            ("<|START_RESPONSE|>Hi<|END_RESPONSE|>", False, "", "Hi"),
            ("<|START_THINKING|>p<|END_THINKING|><|START_ACTION|>[]", False, "p", "<|START_ACTION|>[]"),
            ("<|START_THINKING|>p<|START_ACTION|>[]", False, "p", "<|START_ACTION|>[]"),
        ]),
        "cohere_command4": think_family("<|START_THINKING|>", "<|END_THINKING|>", forced=True, extra=[
            ("<|START_THINKING|>p<|END_THINKING|><|START_TEXT|>Hi<|END_TEXT|>", False, "p", "Hi"),
            ("p<|END_THINKING|><|START_RESPONSE|>Hi<|END_RESPONSE|>", False, "p", "Hi"),
        ]),
        "minicpmv": think_family(extra=[
            ("<think>a\\nb</think>c\\nd `e\\nf`", False, "a\nb", "c\nd `e\\nf`"),
            ("<think>a</think>b<|im_end|>", False, "a", "b"),
            ("<think>$x\\ny$</think>\\\\n<reserved_12>", False, "$x\\ny$", "\\\\n"),
            ("plan<tool_call>\n<function=f>", True, "plan", "<tool_call>\n<function=f>"),
        ]),
        "inkling": _reasoning(
            lambda r, c: f"{INK[2]}{r}{INK[4]}{INK[0]}{INK[1]}{c}{INK[4]}",
            lambda r, c: f"{r}{INK[4]}{INK[0]}{INK[1]}{c}{INK[4]}",
            [
                (f"{INK[2]}cut off", False, "cut off", ""),
                (f"get_weather{INK[3]}{{}}{INK[4]}", False, "", f"{INK[3]}{{}}{INK[4]}"),  # the header is not content
                (f"{INK[2]}a{INK[4]}{INK[0]}{INK[2]}b{INK[4]}{INK[0]}{INK[1]}c<|content_model_end_sampling|>", False, "ab", "c"),
                (f"{INK[2]}plan{INK[3]}{{}}{INK[4]}", False, "plan", f"{INK[3]}{{}}{INK[4]}"),
            ],
        ),
        "muse": _muse_reasoning([(f"{U[1]}bare{U[2]}{U[0]} to=commentary{U[1]}c{U[2]}", False, "bare", "c")]),
        "muse_glimmer": _muse_reasoning([(f"{U[1]}bare{U[2]}{U[0]} to=commentary{U[1]}c{U[2]}", False, "", "")]),
    }  # fmt: skip


TOOL_FORMATS = {
    "hy_v3": hy_v3_cases,
    "hy_v4": hy_v4_cases,
    "k2_horizon": k2_horizon_cases,
    "plamo3": plamo3_cases,
    "cohere_command3": cohere_cases,
    "minicpm5": minicpm5_cases,
    "inkling": inkling_cases,
    "muse": muse_cases,
    "muse_glimmer": muse_glimmer_cases,
}
