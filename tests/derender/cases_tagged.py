"""Tool formats with their own tags, written from each model card / reference template: (output, expected
content, expected calls); at least 40 each."""

from __future__ import annotations

from tests.derender.case_kit import DS, TWO, K, _j, _table, _text  # noqa: F401


def _functions(wrap: str, pad: str):
    """Calls as `<wrap><function=f><parameter=p>value</parameter></function></wrap>`, `pad` around each value."""

    def call(name, args):
        params = "".join(f"<parameter={k}>{pad}{_text(v)}{pad}</parameter>\n" for k, v in args.items())
        return f"<{wrap}>\n<function={name}>\n{params}</function>\n</{wrap}>"

    return lambda calls, i: "\n".join(call(n, a) for n, a in calls)


def qwen3_coder_cases():
    return _table(
        _functions("tool_call", "\n"),
        [
            ("<tool_call>\n<function=zip>\n<parameter=code>\n01234\n</parameter>\n</function>\n</tool_call>", "",
             [("zip", {"code": "01234"})]),
            ("<tool_call>\n<function=zip>\n<parameter=n>\n5.0\n</parameter>\n<parameter=on>\nTrue\n</parameter>\n"
             "</function>\n</tool_call>", "", [("zip", {"n": 5, "on": True})]),
            ("<function=zip>\n<parameter=code>\nx\n</parameter>\n</function>", "", [("zip", {"code": "x"})]),
            ("<tool_call>\n<function=zip>\n<parameter=code>\nx\n<parameter=n>\n2.5\n</function>\n</tool_call>", "",
             [("zip", {"code": "x", "n": 2.5})]),  # missing </parameter>, as vLLM accepts
            ("<tool_call>\n<function=zip>\n<parameter=n>\nnull\n</parameter>\n</function>\n</tool_call>", "",
             [("zip", {"n": None})]),
            ("<tool_call>\n<function=unknown>\n<parameter=q>\n42\n</parameter>\n</function>\n</tool_call>", "",
             [("unknown", {"q": "42"})]),  # no schema: text
            ("<tool_call>\nno function here\n</tool_call>", "<tool_call>\nno function here\n</tool_call>", []),
            ("<tool_call>\n<function=zip>\n<parameter=n>\n1e999\n</parameter>\n</function>\n</tool_call>", "",
             [("zip", {"n": "1e999"})]),  # not a finite number: kept as text
            # a `<function=` before `</function>` starts the next call (vLLM's qwen3 grammar), not more parameters
            ("<tool_call>\n<function=a>\n<parameter=x>\n1\n</parameter>\n<function=b>\n<parameter=y>\n[2]\n"
             "</parameter>\n</function>\n</tool_call>", "", [("a", {"x": 1}), ("b", {"y": [2]})]),
            ("<function=zip>\n<parameter=code>\n7\n</parameter>\n<function=a>\n<parameter=x>\n3\n</parameter>\n"
             "</function>", "", [("zip", {"code": "7"}), ("a", {"x": 3})]),
        ],
    )  # fmt: skip


def seed_oss_cases():
    return _table(
        _functions("seed:tool_call", ""),
        [
            ("<seed:tool_call>\n<function=zip>\n<parameter=n>\n4\n</parameter>\n</function>\n</seed:tool_call>", "",
             [("zip", {"n": 4})]),
            # Qwen's wrapper is text here; the bare function inside is still a call
            ("<tool_call>\n<function=zip>\n</function>\n</tool_call>", "<tool_call>\n\n</tool_call>", [("zip", {})]),
            ("<seed:tool_call>\nnothing\n</seed:tool_call>", "<seed:tool_call>\nnothing\n</seed:tool_call>", []),
        ],
    )  # fmt: skip


def mimo_cases():
    return _table(
        _functions("tool_call", ""),
        [
            ("<tool_call>\n<function=zip>\n<parameter=code>\n 07\n</parameter>\n</function>\n</tool_call>", "",
             [("zip", {"code": "\n 07\n"})]),  # verbatim, newlines included
            ("<function=zip>\n<parameter=n>\n5\n</parameter>\n</function>", "", [("zip", {"n": 5})]),
        ],
    )  # fmt: skip


def glm45_cases():
    def render(calls, i):
        sep = "\n" if i % 2 == 0 else ""  # GLM-4.5/4.6 put newlines between the tags, GLM-4.7 none
        return sep.join(
            f"<tool_call>{n}{sep}"
            + "".join(f"<arg_key>{k}</arg_key>{sep}<arg_value>{_text(v)}</arg_value>{sep}" for k, v in a.items())
            + "</tool_call>"
            for n, a in calls
        )

    return _table(
        render,
        [
            ("<tool_call>zip\n<arg_key>code</arg_key>\n<arg_value>01234</arg_value>\n</tool_call>", "",
             [("zip", {"code": "01234"})]),
            ("<tool_call>other\n<arg_key>n</arg_key>\n<arg_value>12</arg_value>\n</tool_call>", "",
             [("other", {"n": 12})]),  # no schema: JSON-looking values are decoded (vLLM)
            ("<tool_call>get_time\n</tool_call>", "", [("get_time", {})]),
            ("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>", "<tool_call>f\n<arg_key>a</arg_key>"
             "\n<arg_value>1</arg_value>", []),
            ("<tool_call>f\n<arg_key>a</arg_key>\nstray\n</tool_call>", "<tool_call>f\n<arg_key>a</arg_key>\n"
             "stray\n</tool_call>", []),
        ],
    )  # fmt: skip


def _invokes(wrap: str):
    """Calls as `<wrap><invoke name="f"><parameter name="p">value</parameter></invoke></wrap>` (MiniMax-M2, dots)."""

    def render(calls, i):
        invokes = "".join(
            f'<invoke name="{n}">\n'
            + "".join(f'<parameter name="{k}">{_text(v)}</parameter>\n' for k, v in a.items())
            + "</invoke>\n"
            for n, a in calls
        )
        return f"<{wrap}>\n{invokes}</{wrap}>"

    return render


def minimax_m2_cases():
    return _table(
        _invokes("minimax:tool_call"),
        [
            ('<minimax:tool_call>\n<invoke name="zip">\n<parameter name="code">007</parameter>\n</invoke>\n'
             "</minimax:tool_call>", "", [("zip", {"code": "007"})]),
            ("<minimax:tool_call>\nnothing\n</minimax:tool_call>", "<minimax:tool_call>\nnothing\n"
             "</minimax:tool_call>", []),
            ('<minimax:tool_call>\n<invoke name="zip">\n<parameter name="n">3</parameter>\n</invoke>', "",
             [("zip", {"n": 3})]),
        ],
    )  # fmt: skip


def dots_cases():
    return _table(
        _invokes("dots_function_call"),
        [
            ('<dots_function_call>\n<invoke name="zip">\n<parameter name="n">2</parameter>\n</invoke>\n'
             "</dots_function_call>", "", [("zip", {"n": 2})]),
            ('<minimax:tool_call>\n<invoke name="f">\n</invoke>\n</minimax:tool_call>', '<minimax:tool_call>\n'
             '<invoke name="f">\n</invoke>\n</minimax:tool_call>', []),  # MiniMax's wrapper is text here
        ],
    )  # fmt: skip


def deepseek_v3_cases():
    def render(calls, i):
        body = "".join(f"{DS[1]}function{DS[2]}{n}\n```json\n{_j(a, i)}\n```{DS[3]}" for n, a in calls)
        return DS[0] + body + DS[4]

    return _table(
        render,
        [
            (f"{DS[0]}{DS[1]}function{DS[2]}f\n```json\n{{bad}}\n```{DS[3]}{DS[4]}",
             f"{DS[0]}{DS[1]}function{DS[2]}f\n```json\n{{bad}}\n```{DS[3]}{DS[4]}", []),
            (f"{DS[0]}{DS[1]}function{DS[2]}f\n```json\n{{}}\n```{DS[3]}", "", [("f", {})]),  # EOS ate the end
            (f"x{DS[0]}{DS[1]}function{DS[2]}f\n```json\n{{\"a\": 1", f"x{DS[0]}{DS[1]}function{DS[2]}f\n```json"
             '\n{"a": 1', []),
            # R1 distills' openers written as text, and a call without its begin tag (llama.cpp reads them)
            (f"<｜tool▁calls｜>function{DS[2]}f\n```json\n{{\"a\": 1}}\n```{DS[3]}{DS[4]}", "", [("f", {"a": 1})]),
            (f"Hi <｜tool calls begin｜>{DS[1]}function{DS[2]}g\n```json\n{{}}\n```{DS[3]}", "Hi ", [("g", {})]),
            (f"<｜tool_calls_begin｜>{DS[1]}h{DS[2]}{{\"b\": [1]}}{DS[3]}{DS[4]}", "", [("h", {"b": [1]})]),
            (f"<｜tool\\_calls\\_begin｜>{DS[1]}function{DS[2]}a\n```json\n{{}}\n```{DS[3]}function{DS[2]}b\n```json\n"
             f"{{}}\n```{DS[3]}{DS[4]}", "", [("a", {}), ("b", {})]),
        ],
    )  # fmt: skip


def deepseek_v31_cases():
    def render(calls, i):
        return DS[0] + "".join(f"{DS[1]}{n}{DS[2]}{_j(a, i)}{DS[3]}" for n, a in calls) + DS[4]

    return _table(
        render,
        [
            (f"{DS[0]}{DS[1]}f{DS[2]}not json{DS[3]}{DS[4]}", f"{DS[0]}{DS[1]}f{DS[2]}not json{DS[3]}{DS[4]}", []),
            (f"{DS[0]}{DS[1]}f{DS[2]}{{}}{DS[3]}{DS[1]}g{DS[2]}oops{DS[3]}{DS[4]}", f"{DS[1]}g{DS[2]}oops{DS[3]}",
             [("f", {})]),  # a bad call after a good one is text
            (f"{DS[0]}{DS[1]}f{DS[2]}{{\"a\": 1e999}}{DS[3]}{DS[4]}",
             f"{DS[0]}{DS[1]}f{DS[2]}{{\"a\": 1e999}}{DS[3]}{DS[4]}", []),
            (f"{DS[0]}{DS[1]}get_time{DS[2]}{DS[3]}{DS[4]}", "", [("get_time", {})]),  # no arguments at all
        ],
    )  # fmt: skip


def kimi_k2_cases():
    def render(calls, i):
        body = "".join(f"{K[1]}functions.{n}:{j}{K[2]}{_j(a, i)}{K[3]}" for j, (n, a) in enumerate(calls))
        return K[0] + body + K[4]

    return _table(
        render,
        [
            (f"<|tool_call_section_begin|>{K[1]}functions.f:0{K[2]}{{}}{K[3]}<|tool_call_section_end|>", "",
             [("f", {})]),
            (f"{K[0]}{K[1]}functions.f:0{K[2]}{{oops{K[3]}{K[4]}", f"{K[0]}{K[1]}functions.f:0{K[2]}{{oops{K[3]}"
             f"{K[4]}", []),
            (f"{K[0]}{K[1]}get_weather:3{K[2]}{{\"c\": 1}}{K[3]}{K[4]}", "", [("get_weather", {"c": 1})]),
            # an id without its counter is no call; a bare counter names the one tool that fits the arguments
            (f"{K[0]}{K[1]}functions.f.0 {K[2]}{{}}{K[3]}{K[1]}functions.g:1 {K[2]}{{}}{K[3]}{K[4]}", "",
             [("g", {})]),
            (f"Checking. {K[0]}{K[1]}0 {K[2]}{{\"code\": \"7\", \"on\": true}}{K[3]}{K[4]}", "Checking. ",
             [("zip", {"code": "7", "on": True})]),
            (f"{K[0]}{K[1]}0{K[2]}{{\"x\": 1}}{K[3]}{K[4]}", f"{K[0]}{K[1]}0{K[2]}{{\"x\": 1}}{K[3]}{K[4]}", []),
            # cut off after whole arguments: still a call (vLLM, SGLang); cut inside them: text
            (f"Working. {K[0]}{K[1]}functions.search:0{K[2]}{{\"q\": \"t\"}}", "Working. ", [("search", {"q": "t"})]),
            (f"{K[0]}{K[1]}functions.f:0{K[2]}{{}}{K[3]}{K[1]}functions.g:1{K[2]}{{\"b\": 2}}", "",
             [("f", {}), ("g", {"b": 2})]),
            (f"{K[0]}{K[1]}functions.f:0{K[2]}{{\"q\": \"t", f"{K[0]}{K[1]}functions.f:0{K[2]}{{\"q\": \"t", []),
            (f"{K[0]}{K[1]}functions.get_time:0{K[2]}{K[3]}{K[4]}", "", [("get_time", {})]),  # no arguments at all
            (f"x{K[0]}{K[1]}functions.get_time:0{K[2]}", f"x{K[0]}{K[1]}functions.get_time:0{K[2]}", []),
        ],
    )  # fmt: skip


def _dsml(section: str, bar: str):
    """DeepSeek's DSML calls in `section`; `bar` is the DSML bar with V4.1's space or without."""

    def render(calls, i):
        def param(k, v):
            string = isinstance(v, str) and (i % 2 == 0 or k != "q")
            value = v if string else _j(v, i)
            return f'<{bar}parameter name="{k}" string="{"true" if string else "false"}">{value}</{bar}parameter>\n'

        invokes = "".join(
            f'<{bar}invoke name="{n}">\n' + "".join(param(k, v) for k, v in a.items()) + f"</{bar}invoke>\n"
            for n, a in calls
        )
        return f"<{bar}{section}>\n{invokes}</{bar}{section}>"

    return render


D = "｜DSML｜"


def deepseek_v32_cases():
    return _table(
        _dsml("function_calls", D),
        [
            (f'<{D}function_calls>\n<{D}invoke name="zip">\n<{D}parameter name="code" string="true">007'
             f'</{D}parameter>\n<{D}parameter name="n">2.5</{D}parameter>\n</{D}invoke>\n</{D}function_calls>', "",
             [("zip", {"code": "007", "n": 2.5})]),  # no `string` attribute: JSON when it parses
            (f'<{D}function_calls>\n<{D}invoke name="f">\n<{D}parameter name="p" string="false">not json'
             f'</{D}parameter>\n</{D}invoke>\n</{D}function_calls>', "", [("f", {"p": "not json"})]),
            (f'<{D}function_calls>\n<{D}invoke name="a">\n<{D}parameter name="arguments" string="false">{{"x": 4}}'
             f'</{D}parameter>\n</{D}invoke>\n</{D}function_calls>', "", [("a", {"x": 4})]),  # wrapper unwrapped
            (f"<{D}function_calls>\nnothing\n</{D}function_calls>", f"<{D}function_calls>\nnothing\n"
             f"</{D}function_calls>", []),
            (f'<{D}tool_calls>\n<{D}invoke name="f">\n</{D}invoke>\n</{D}tool_calls>', f"<{D}tool_calls>\n\n"
             f"</{D}tool_calls>", [("f", {})]),  # V4's wrapper is text here; an invoke outside a section is a call
            (f'<{D}invoke name="g">\n<{D}parameter name="a" string="true">x</{D}parameter>\n</{D}invoke>', "",
             [("g", {"a": "x"})]),
            (f'<{D}function_calls>\n<{D}invoke name="f">\n</{D}invoke>\nstray\n</{D}function_calls>',
             f'<{D}function_calls>\n<{D}invoke name="f">\n</{D}invoke>\nstray\n</{D}function_calls>', []),
        ],
    )  # fmt: skip


def deepseek_v4_cases():
    return _table(
        _dsml("tool_calls", D),
        [
            (f'<{D}toolcalls>\n<{D}invoke name="f">\n<{D}parameter name="a" string="true">1</{D}parameter>\n'
             f"</{D}invoke>\n</{D}tool_calls>", "", [("f", {"a": "1"})]),
            (f'Hi <{D}tool_calls>\n<{D}invoke name="g">\n<{D}parameter name="b" string="false">[1, 2]'
             f"</{D}parameter>\n</{D}invoke>", "Hi ", [("g", {"b": [1, 2]})]),  # cut off after a whole call
            (f'<{D}tool_calls>\n<{D}invoke name="">\n</{D}invoke>\n</{D}tool_calls>', f'<{D}tool_calls>\n'
             f'<{D}invoke name="">\n</{D}invoke>\n</{D}tool_calls>', []),
        ],
    )  # fmt: skip


def deepseek_v41_cases():
    return _table(
        _dsml("calls", D + " "),
        [(f'<{D} calls>\n<{D} invoke name="f">\n<{D} parameter name="a" string="false">true</{D} parameter>\n'
          f"</{D} invoke>\n</{D} calls>", "", [("f", {"a": True})])],
    )  # fmt: skip


S3 = (
    "<｜tool_calls_begin｜>",
    "<｜tool_call_begin｜>",
    "<｜tool_sep｜>",
    "<｜tool_call_end｜>",
    "<｜tool_calls_end｜>",
)


def step3_cases():
    def render(calls, i):
        params = lambda a: "".join(  # noqa: E731
            f'<steptml:parameter name="{k}">{_text(v)}</steptml:parameter>' for k, v in a.items()
        )
        invoke = lambda n, a: f'<steptml:invoke name="{n}">{params(a)}</steptml:invoke>'  # noqa: E731
        return S3[0] + "".join(f"{S3[1]}function{S3[2]}{invoke(n, a)}{S3[3]}" for n, a in calls) + S3[4]

    return _table(
        render,
        [
            (f'{S3[0]}{S3[1]}function{S3[2]}<steptml:invoke name="zip"><steptml:parameter name="code"> 07 '
             f'</steptml:parameter><steptml:parameter name="on">true</steptml:parameter></steptml:invoke>{S3[3]}'
             f"{S3[4]}", "", [("zip", {"code": "07", "on": True})]),
            (f'{S3[0]}{S3[1]}tool{S3[2]}<steptml:invoke name="f"></steptml:invoke>{S3[3]}{S3[4]}',
             f'{S3[0]}{S3[1]}tool{S3[2]}<steptml:invoke name="f"></steptml:invoke>{S3[3]}{S3[4]}', []),
            (f'{S3[0]}{S3[1]}function{S3[2]}<steptml:invoke name="other"><steptml:parameter name="n">5'
             f"</steptml:parameter></steptml:invoke>{S3[3]}{S3[4]}", "", [("other", {"n": 5})]),  # no schema: JSON
        ],
    )  # fmt: skip
