"""Tool formats of the smaller families, written from each model card / reference template: (output, expected
content, expected calls)."""

from __future__ import annotations

from tests.derender.case_kit import _j, _objects, _table


def _py_call(name: str, args: dict) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def phi4_mini_cases():
    return _table(
        lambda calls, i: "functools" + _j(_objects(calls, i), i),
        [
            ('functools[{"name": "f", "parameters": {"a": 1}}]', "", [("f", {"a": 1})]),
            ("use functools.partial here", "use functools.partial here", []),
            ('functools [{"name": "f"}]', 'functools [{"name": "f"}]', []),  # the list follows the word at once
            ("functools[oops]", "functools[oops]", []),
            (' functools[{"name": "f", "arguments": {"a": 1}}]', "", [("f", {"a": 1})]),  # FireFunction v2 (llama.cpp)
        ],
    )  # fmt: skip


A = ("<|action_start|><|plugin|>", "<|action_end|>")


def internlm_cases():
    def render(calls, i):
        return "".join(f"{A[0]}\n{_j(o, i)}{A[1]}" for o in _objects(calls, i, "parameters"))

    return _table(
        render,
        [
            (f'{A[0]}\n{{"name": "f", "arguments": {{"a": 1}}}}{A[1]}', "", [("f", {"a": 1})]),
            (f"{A[0]}\nnot json{A[1]}", f"{A[0]}\nnot json{A[1]}", []),
            (f'I will search.{A[0]}\n{{"name": "search", "parameters": {{"q": "x"}}}}', "I will search.",
             [("search", {"q": "x"})]),  # the end token was eaten by EOS
        ],
    )  # fmt: skip


def granite_20b_fc_cases():
    return _table(
        lambda calls, i: " ".join(f"<function_call> {_j(o, i)}" for o in _objects(calls, i)),
        [
            ('<function_call> {"name": "f", "arguments": {"a": [1]}}', "", [("f", {"a": [1]})]),
            ("<function_call> oops", "<function_call> oops", []),
        ],
    )  # fmt: skip


T = ("<|tool_call_start|>", "<|tool_call_end|>")


def lfm2_cases():
    return _table(
        lambda calls, i: f"{T[0]}[{', '.join(_py_call(n, a) for n, a in calls)}]{T[1]}",
        [
            (f"{T[0]}[f(a=1), g(2)]{T[1]}", "", [("f", {"a": 1})]),  # the bad element alone is dropped
            ("[f(a=1)]", "[f(a=1)]", []),  # a bare list is text: LFM2 always wraps its calls
            (f"{T[0]}[not a call]{T[1]}", f"{T[0]}[not a call]{T[1]}", []),
            (f'{T[0]}[{{"name": "f", "arguments": {{"a": 1}}}}]{T[1]}', "", [("f", {"a": 1})]),  # JSON tools (llama.cpp)
            (f'{T[0]}[{{"name": "f"}}, {{"oops": 1}}]{T[1]}', f'{T[0]}[{{"name": "f"}}, {{"oops": 1}}]{T[1]}', []),
        ],
    )  # fmt: skip


def olmo3_cases():
    return _table(
        lambda calls, i: "<function_calls>\n" + "\n".join(_py_call(n, a) for n, a in calls) + "\n</function_calls>",
        [
            ("<function_calls>f(a=1)</function_calls>", "", [("f", {"a": 1})]),
            ("<function_calls>\nno calls\n</function_calls>", "<function_calls>\nno calls\n</function_calls>", []),
            ("<function_calls>\nf(s='a\\nb')\n</function_calls>", "", [("f", {"s": "a\nb"})]),
        ],
    )  # fmt: skip


def xlam_cases():
    return _table(
        lambda calls, i: ["", "```json\n", "[TOOL_CALLS]", "<tool_call>"][i % 4] + _j(_objects(calls, i), i)
        + ["", "\n```", "", "</tool_call>"][i % 4],
        [
            ('```\n[{"name": "f", "arguments": {"a": 1}}]\n```', "", [("f", {"a": 1})]),
            ("```\nprint(1)\n```", "```\nprint(1)\n```", []),
            ("See [1, 2] and [{}]", "See [1, 2] and [{}]", []),  # a list after text is prose
            ('[{"name": "f", "arguments": {"a": 1}}', '[{"name": "f", "arguments": {"a": 1}}', []),
        ],
    )  # fmt: skip


M3 = "]<]minimax[>["


def _m3_text(value) -> str:
    return value if isinstance(value, str) else _j(value, 1)


def minimax_m3_cases():
    def render(calls, i):
        invokes = "".join(
            f'{M3}<invoke name="{n}">\n'
            + "".join(f"{M3}<{k}>{_m3_text(v)}{M3}</{k}>\n" for k, v in a.items())
            + f"{M3}</invoke>\n"
            for n, a in calls
        )
        return f"{M3}<tool_call>\n{invokes}{M3}</tool_call>"

    def one(name, params):
        return f"{M3}<tool_call>\n{M3}<invoke name={name}>\n{params}\n{M3}</invoke>\n{M3}</tool_call>"

    return _table(
        render,
        [
            (one('"b"', f"{M3}<y>{M3}<item>1{M3}</item>{M3}<item>2{M3}</item>{M3}</y>"), "", [("b", {"y": ["1", "2"]})]),
            (one("'b'", f"{M3}<s>x{M3}</s>{M3}<s>y{M3}</s>{M3}<y>{M3}</y>"), "", [("b", {"s": ["x", "y"], "y": []})]),
            (one("zip", f"{M3}<n>2.0{M3}</n>{M3}<on>true{M3}</on>"), "", [("zip", {"n": 2, "on": True})]),
            (one('"other"', f"{M3}<k>{M3}<a>1{M3}</a>{M3}</k>"), "", [("other", {"k": {"a": "1"}})]),  # no schema: text
            (one('"a"', f"{M3}<x>1{M3}</x>{M3}<broken>"), "", [("a", {"x": 1})]),  # stops at the malformed element
            (f"{M3}<tool_call>\nnothing\n{M3}</tool_call>", f"{M3}<tool_call>\nnothing\n{M3}</tool_call>", []),
        ],
    )  # fmt: skip


OP, CL, S = "<|open|>", "<|close|>", "<|sep|>"


def _k3_argument(key, value) -> str:
    kind = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array"}.get(type(value), "object")
    return f'{OP}argument key="{key}" type="{kind}"{S}{_m3_text(value)}{CL}argument{S}'


def kimi_k3_cases():
    def render(calls, i):
        body = "".join(
            f'{OP}call tool="{n}" index="{j}"{S}' + "".join(_k3_argument(k, v) for k, v in a.items()) + f"{CL}call{S}"
            for j, (n, a) in enumerate(calls)
        )
        return f"{OP}tools{S}{body}{CL}tools{S}"

    return _table(
        render,
        [
            (f"{OP}response{S}Running it.{CL}response{S}{OP}tools{S}{OP}call tool=\"f\" index=\"1\"{S}{CL}call{S}{CL}tools{S}",
             "Running it.", [("f", {})]),
            (f"{OP}response{S}Just text.{CL}response{S}", "Just text.", []),
            (f'{OP}tools{S}{OP}call tool="a&amp;b" index="1"{S}{_k3_argument("q", "x")}{CL}call{S}{CL}tools{S}', "",
             [("a&b", {"q": "x"})]),
            (f'{OP}tools{S}{OP}call tool="f" index="1"{S}{OP}argument key="n" type="integer"{S}oops{CL}argument{S}'
             f"{CL}call{S}{CL}tools{S}", "", [("f", {"n": "oops"})]),  # not JSON: kept as text (vLLM)
            (f"{OP}tools{S}nothing{CL}tools{S}", f"{OP}tools{S}nothing{CL}tools{S}", []),
        ],
    )  # fmt: skip


TP = ("<|tools_prefix|>", "<|tools_suffix|>")


def apertus_cases():
    return _table(
        lambda calls, i: TP[0] + _j([{n: a} for n, a in calls], i) + TP[1],
        [
            (f'{TP[0]}[{{"f": {{"a": 1}}, "g": {{}}}}]{TP[1]}', f'{TP[0]}[{{"f": {{"a": 1}}, "g": {{}}}}]{TP[1]}', []),
            (f"{TP[0]}not json{TP[1]}", f"{TP[0]}not json{TP[1]}", []),
            (f'Let me see. {TP[0]}[{{"get_weather": {{"loc": "Paris"}}}}]', "Let me see. ",
             [("get_weather", {"loc": "Paris"})]),  # the suffix eaten by EOS
        ],
    )  # fmt: skip


GC = "<|message_sep|>function call<|role_sep|>\n"


def gigachat3_cases():
    return _table(
        lambda calls, i: "".join(GC + _j(o, i) for o in _objects(calls, i)),
        [
            ('<|function_call|>{"name": "f", "arguments": {"a": 1}}', "", [("f", {"a": 1})]),
            (f'{GC}{{"name": "f", "arguments": "{{}}"}}', f'{GC}{{"name": "f", "arguments": "{{}}"}}', []),
            (f"{GC}not json", f"{GC}not json", []),
        ],
    )  # fmt: skip
