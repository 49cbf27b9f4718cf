"""Formats vLLM 0.33 added, written from its parsers' documented wire formats and the models' renderers: tool
cases (output, expected content, expected calls) and reasoning cases (output, started, reasoning, content)."""

from __future__ import annotations

from tests.derender.case_kit import _j, _table, _text
from tests.derender.cases_reasoning import think_family


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


DROP = "<|im_end|>"


def reasoning_cases() -> dict:
    return {
        "granite_thinking_parser": [(t, s, r, c.lstrip("\n")) for t, s, r, c in think_family(extra=[
            ("<think>plan\n</think>\n\nAnswer", False, "plan\n", "Answer"),
            ("<think>plan</think>\n\n", False, "plan", ""),
            ("<think>plan<tool_call>\n<function=f>", False, "plan", "<tool_call>\n<function=f>"),
        ])],  # the template's newlines after </think> are not content
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
    }  # fmt: skip


TOOL_FORMATS = {
    "hy_v3": hy_v3_cases,
    "hy_v4": hy_v4_cases,
    "k2_horizon": k2_horizon_cases,
    "plamo3": plamo3_cases,
    "cohere_command3": cohere_cases,
    "minicpm5": minicpm5_cases,
}
