"""Cases for the formats added after the first four, written from each format's public documentation and
model cards: (output, expected content, expected calls) for tool formats, (output, reasoning_started, expected
reasoning, expected content) for reasoning formats. At least 40 per format; `TOOLS` types the XML formats."""

from __future__ import annotations

import itertools
import json

from tests.derender.parser_cases import ARGS, NAMES

CONTENT = ["", "Let me check. ", "Sure!\n", "a < b; [1] {x}: "]
TWO = [("a", {"x": 1}), ("b", {"y": [2], "s": "t"})]
_KINDS = {str: "string", bool: "boolean", int: "integer", float: "number", dict: "object", list: "array"}


def _schema(args: dict) -> dict:
    return {k: {"type": _KINDS.get(type(v), "string")} for k, v in args.items()}


TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": props}}}
    for name, props in {
        **{n: {k: v for a in ARGS for k, v in _schema(a).items()} for n in NAMES},
        "a": {"x": {"type": "integer"}},
        "b": {"y": {"type": "array"}, "s": {"type": "string"}},
        "zip": {"code": {"type": "string"}, "n": {"type": "number"}, "on": {"type": "boolean"}},
    }.items()
]


def _table(render, extra, content=CONTENT) -> list:
    """ARGS x content prefixes, two calls, then the format's own edge cases."""
    cases = []
    for i, (args, lead) in enumerate(itertools.product(ARGS, content)):
        name = NAMES[i % len(NAMES)]
        cases.append((lead + render([(name, args)], i), lead, [(name, args)]))
    cases.append((render(TWO, 0), "", TWO))
    cases.append(("Done. " + render(TWO, 1) + "\n", "Done. ", TWO))
    cases.append((render(TWO, 2) + " after", " after", TWO))
    cases.append(("\n  " + render([("f", {})], 3), "", [("f", {})]))
    cases.append((render([("g", {"k": "v"})], 4) + "\n\n", "", [("g", {"k": "v"})]))
    cases.append(("no tools here", "no tools here", []))
    cases.append(("", "", []))
    return cases + extra


def _j(value, i=0) -> str:
    return json.dumps(value, ensure_ascii=i % 2 == 0)


def _text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def qwen3_coder_cases():
    def call(name, args):
        params = "".join(f"<parameter={k}>\n{_text(v)}\n</parameter>\n" for k, v in args.items())
        return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"

    def render(calls, i):
        return "\n".join(call(n, a) for n, a in calls)

    return _table(
        render,
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


def minimax_m2_cases():
    def render(calls, i):
        invokes = "".join(
            f'<invoke name="{n}">\n'
            + "".join(f'<parameter name="{k}">{_text(v)}</parameter>\n' for k, v in a.items())
            + "</invoke>\n"
            for n, a in calls
        )
        return f"<minimax:tool_call>\n{invokes}</minimax:tool_call>"

    return _table(
        render,
        [
            ('<minimax:tool_call>\n<invoke name="zip">\n<parameter name="code">007</parameter>\n</invoke>\n'
             "</minimax:tool_call>", "", [("zip", {"code": "007"})]),
            ("<minimax:tool_call>\nnothing\n</minimax:tool_call>", "<minimax:tool_call>\nnothing\n"
             "</minimax:tool_call>", []),
            ('<minimax:tool_call>\n<invoke name="zip">\n<parameter name="n">3</parameter>\n</invoke>', "",
             [("zip", {"n": 3})]),
        ],
    )  # fmt: skip


DS = (
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
)


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
        ],
    )  # fmt: skip


K = ("<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
     "<|tool_calls_section_end|>")  # fmt: skip


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
        ],
    )  # fmt: skip


def _objects(calls, i, key="arguments"):
    return [{"name": n, key: a} for n, a in calls]


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
        ],
    )  # fmt: skip


def hunyuan_cases():
    def render(calls, i):
        return "<tool_calls>" + _j(_objects(calls, i), i) + "</tool_calls>"

    return _table(
        render,
        [
            ("<tool_calls>[]</tool_calls>", "<tool_calls>[]</tool_calls>", []),
            ("<tool_calls>oops</tool_calls>", "<tool_calls>oops</tool_calls>", []),
            ('<tool_calls>[{"name": "f", "arguments": "{\\"a\\": 1}"}]</tool_calls>', "", [("f", {"a": 1})]),
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
        ],
    )  # fmt: skip


H = ("<|start|>assistant", "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|constrain|>")


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


TOOL_FORMATS = {
    "qwen3_coder": qwen3_coder_cases,
    "glm45": glm45_cases,
    "minimax_m2": minimax_m2_cases,
    "deepseek_v3": deepseek_v3_cases,
    "deepseek_v31": deepseek_v31_cases,
    "kimi_k2": kimi_k2_cases,
    "granite": granite_cases,
    "hunyuan_a13b": hunyuan_cases,
    "minimax": minimax_cases,
    "qwen2_5_coder": qwen25_coder_cases,
    "gemma": gemma_cases,
    "harmony": harmony_tool_cases,
}


REASONS = ["", "Let me think.", "a < b, 2 </thi nk", "multi\nline\n", "你好 🎉"]
ANSWERS = ["", "Answer: 42", "\n\nFinal <b>bold</b>", "plain"]


def _reasoning(render, started_render=None, extra=()) -> list:
    """REASONS x ANSWERS as the model writes them, and (where the family has it) with the block opened by the
    prompt; then the family's own cases."""
    cases = []
    for r, c in itertools.product(REASONS, ANSWERS):
        cases.append((render(r, c), False, r, c))
        if started_render is not None:
            cases.append((started_render(r, c), True, r, c))
    return cases + list(extra)


def think_family(start="<think>", end="</think>", forced=False, extra=()):
    def opened(r, c):
        return f"{r}{end}{c}"

    base = [
        (
            "no reasoning at all",
            False,
            "no reasoning at all" if forced else "",
            "" if forced else "no reasoning at all",
        ),
        (f"{start}cut off by length", False, "cut off by length", ""),
        (f"{start}again{end}x", True, "again", "x"),
        (f"  {start}lead space{end}x", False, "lead space", "x"),
    ]
    return _reasoning(lambda r, c: f"{start}{r}{end}{c}", opened, [*base, *extra])


def reasoning_formats() -> dict:
    return {
        "qwen3": think_family(extra=[
            ("<think>plan<tool_call>{}</tool_call>", False, "plan", "<tool_call>{}</tool_call>"),
            ("plan\n<tool_call>{}</tool_call>", True, "plan\n", "<tool_call>{}</tool_call>"),
        ]),
        "deepseek_r1": think_family(forced=True, extra=[("abc</think>def", False, "abc", "def")]),
        "glm45": think_family(extra=[("\n<think>x</think>\ny", False, "x", "\ny")]),
        "kimi": think_family("◁think▷", "◁/think▷"),
        "kimi_k2": think_family(),
        "nemotron": think_family(),
        "minimax_m2": think_family(forced=True),
        "seed_oss": think_family("<seed:think>", "</seed:think>"),
        "mistral": think_family("[THINK]", "[/THINK]"),
        "granite": _reasoning(
            lambda r, c: f"Here is my thought process:{r}Here is my response:{c}",
            None,
            [(f"Here's my thought process:{r}Here's my response:{c}", False, r, c) for r, c in itertools.product(REASONS, ANSWERS)]
            + [("This is content", False, "", "This is content")],
        ),
        "hunyuan": _reasoning(
            lambda r, c: f"<think>\n{r}\n</think>\n<answer>\n{c}\n</answer>",
            lambda r, c: f"{r}\n</think>\n<answer>\n{c}\n</answer>",
            [("no tags", False, "", "no tags"), ("<think>\nx\n</think>\ny", False, "x", "y")],
        ),
        "gemma": _reasoning(
            lambda r, c: f"<unused94>thought\n{r}<unused95>{c}",
            None,
            [("no thought", False, "", "no thought"), ("<unused94>cut", False, "cut", "")]
            + [(f"<unused94>thought{r}<unused95>{c}", False, r, c) for r, c in itertools.product(REASONS, ANSWERS)],
        ),
        "minimax": [
            (f"{r}</think>{c}", started, "", f"<think>{r}</think>{c}")
            for r, c in itertools.product(REASONS, ANSWERS)
            for started in (False, True)
        ]
        + [("<think>x</think>y", False, "", "<think>x</think>y")],
        "harmony": _reasoning(
            lambda r, c: f"{H[1]}analysis{H[2]}{r}{H[3]}{H[0]}{H[1]}final{H[2]}{c}",
            None,
            [
                (f"{H[1]}final{H[2]}direct", False, "", "direct"),
                (f"{H[1]}analysis{H[2]}cut", False, "cut", ""),
                (f"{H[1]}commentary{H[2]}preamble{H[3]}", False, "", "preamble"),
                (f"{H[1]}analysis{H[2]}a{H[3]}{H[0]}{H[1]}analysis{H[2]}b{H[3]}", False, "ab", ""),
            ]
            + [(f"{H[0]}{H[1]}analysis{H[2]}{r}{H[3]}{H[0]}{H[1]}final{H[2]}{c}<|return|>", False, r, c)
               for r, c in itertools.product(REASONS, ANSWERS)],
        ),
    }  # fmt: skip
