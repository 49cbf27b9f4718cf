"""At least 40 cases per parser: (model output, expected content, expected calls or reasoning)."""

from __future__ import annotations

import itertools
import json

ARGS = [
    {},
    {"city": "Paris"},
    {"city": "São Paulo", "unit": "celsius"},
    {"q": 'a "quoted" {brace} [bracket] \\ back'},
    {"n": 3, "x": 1.5, "ok": True, "none": None},
    {"nested": {"list": [1, {"deep": "}"}], "empty": {}}},
    {"text": "你好 🎉 ünïcödé"},
    {"items": ["a, b", "(c)", "d=e"]},
]
NAMES = ["get_weather", "search", "f", "lookup_user_2"]
CONTENT = ["", "Let me check. ", "Sure!\n", "Calling <tools> now: "]


def hermes_cases():
    cases = []
    for i, (args, content) in enumerate(itertools.product(ARGS, CONTENT)):
        name = NAMES[i % len(NAMES)]
        compact = i % 2 == 0
        body = {"name": name, "arguments": args} if i % 3 else {"arguments": args, "name": name}
        text = json.dumps(body, separators=(",", ":") if compact else None, ensure_ascii=i % 4 == 0)
        cases.append((f"{content}<tool_call>\n{text}\n</tool_call>", content, [(name, args)]))
    two = [("a", {"x": 1}), ("b", {"y": [2]})]
    blocks = "\n".join(f'<tool_call>{{"name": "{n}", "arguments": {json.dumps(a)}}}</tool_call>' for n, a in two)
    cases += [
        (blocks, "", two),
        (blocks + " done", " done", two),
        (blocks + "\n \n", "", two),
        ('<tool_call>{"name": "s", "arguments": "{\\"q\\": 1}"}</tool_call>', "", [("s", {"q": 1})]),
        ('<tool_call>{"name": "p", "parameters": {"k": "v"}}</tool_call>', "", [("p", {"k": "v"})]),
        ('<tool_call>{"name": "e"}</tool_call>', "", [("e", {})]),
        ("no tools here", "no tools here", []),
        ("a < b and <tool but not a call", "a < b and <tool but not a call", []),
        ("<tool_call>not json</tool_call>", "<tool_call>not json</tool_call>", []),
        ('<tool_call>{"arguments": {}}</tool_call>', '<tool_call>{"arguments": {}}</tool_call>', []),
        # cut off by length: not valid JSON, so content (vLLM too)
        ('<tool_call>{"name": "cut", "arguments": {"a": 1', '<tool_call>{"name": "cut", "arguments": {"a": 1', []),
        ('<tool_call>{"name": "s", "arguments": "hello"}</tool_call>', "", [("s", "hello")]),
        ('<tool_call>{"name": "s", "arguments": "[oops"}</tool_call>', "", [("s", "[oops")]),
        (
            '<tool_call>{"name": "s", "arguments": {"t": "a </tool_call> b"}}</tool_call>',
            "",
            [("s", {"t": "a </tool_call> b"})],
        ),
        (
            '<tool_call>{"name": "s", "arguments": {"a": 1}</tool_call>',
            '<tool_call>{"name": "s", "arguments": {"a": 1}</tool_call>',
            [],
        ),
        (
            '<tool_call>{"name": "s", "arguments": {"a": 1e999}}</tool_call>',
            '<tool_call>{"name": "s", "arguments": {"a": 1e999}}</tool_call>',
            [],
        ),
        ('<tool_call>{"name": "s", "arguments": {"a": 1}}', "", [("s", {"a": 1})]),  # EOS ate the closing tag
        (
            '<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"y": 1}}]</tool_call>',
            "",
            [("a", {}), ("b", {"y": 1})],
        ),
        ("ends with <tool_c", "ends with <tool_c", []),
    ]
    return cases


def llama3_cases():
    cases = []
    for i, args in enumerate(ARGS * 5):
        name = NAMES[i % len(NAMES)]
        key = "parameters" if i % 2 else "arguments"
        prefix = ["", "<|python_tag|>", "  ", "\n<|python_tag|> "][i % 4]
        text = json.dumps({"name": name, key: args}, ensure_ascii=i % 3 == 0)
        cases.append((prefix + text, "", [(name, args)]))
    two = '{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {}}'
    cases += [
        (two, "", [("a", {"x": 1}), ("b", {})]),
        (two + "; ", "", [("a", {"x": 1}), ("b", {})]),
        ("Hello, world", "Hello, world", []),
        ("The answer is {x}", "The answer is {x}", []),
        ('{"not": "a call"}', '{"not": "a call"}', []),
        ("{broken", "{broken", []),
        ("", "", []),
        ('{"name": "t", "parameters": {"a": 1}} and text', " and text", [("t", {"a": 1})]),
        ('Here is the call: {"name": "t", "parameters": {"a": 1}}', "Here is the call: ", [("t", {"a": 1})]),
        ('{"name": "t", "parameters": {"a": 1}', '{"name": "t", "parameters": {"a": 1}', []),
        ('{"name": "t", "parameters": {"a": NaN}}', '{"name": "t", "parameters": {"a": NaN}}', []),
        ('{"name": "t", "parameters": {"a": 1e999}}', '{"name": "t", "parameters": {"a": 1e999}}', []),
        ('[{"name": "a", "parameters": {}}, {"name": "b", "parameters": {"x": 2}}]', "", [("a", {}), ("b", {"x": 2})]),
        ('{"type": "function", "name": "t", "parameters": {"a": 1}}', "", [("t", {"a": 1})]),
        # untagged, no arguments key: data, not a call (vLLM too); the tag makes it one
        ('{"name": "Ada"}', '{"name": "Ada"}', []),
        (
            'Result: [{"name": "Ada"}, {"name": "b", "parameters": {}}]',
            'Result: [{"name": "Ada"}, {"name": "b", "parameters": {}}]',
            [],
        ),
        ('<|python_tag|>{"name": "now"}', "", [("now", {})]),
        # Llama 3.1's built-in tools, as its chat template writes them (llama.cpp reads them)
        (
            '<|python_tag|>brave_search.call(query="weather in Paris")',
            "",
            [("brave_search", {"query": "weather in Paris"})],
        ),
        ("<|python_tag|>python.call(code=\"print('hey')\")", "", [("python", {"code": "print('hey')"})]),
        (
            'I will look. <|python_tag|>wolfram_alpha.call(query="2+2")',
            "I will look. ",
            [("wolfram_alpha", {"query": "2+2"})],
        ),
        ("<|python_tag|>print('hey')", "<|python_tag|>print('hey')", []),  # not a call form
        ('<|python_tag|>brave_search.call(query="cut', '<|python_tag|>brave_search.call(query="cut', []),
    ]
    return cases


def mistral_cases():
    cases = []
    for i, (args, content) in enumerate(itertools.product(ARGS, CONTENT)):
        name = NAMES[i % len(NAMES)]
        calls = [(name, args)] if i % 2 else [(name, args), ("second", {"k": i})]
        body = json.dumps([{"name": n, "arguments": a} for n, a in calls], ensure_ascii=i % 3 == 0)
        cases.append((f"{content}[TOOL_CALLS] {body}", content, calls))
    cases += [
        ('[TOOL_CALLS][{"name": "a", "arguments": {}}] after', " after", [("a", {})]),
        ("no calls [TOOL", "no calls [TOOL", []),
        ("[TOOL_CALLS] not a call", "[TOOL_CALLS] not a call", []),  # shown as written
        ('[TOOL_CALLS][{"no": "name"}] x', '[TOOL_CALLS][{"no": "name"}] x', []),
        # cut off by length: not valid JSON, so content
        (
            '[TOOL_CALLS][{"name": "cut", "arguments": {"a": [1',
            '[TOOL_CALLS][{"name": "cut", "arguments": {"a": [1',
            [],
        ),
        ("[TOOL_CALLS][]", "", []),
        ("[TOOL_CALLS]", "", []),
        ('[TOOL_CALLS][{"name": "p", "arguments": "{\\"q\\": 1}"}]', "", [("p", {"q": 1})]),
    ]
    for i, args in enumerate(ARGS):  # v11: [TOOL_CALLS]name[ARGS]{...} per call
        calls = [(NAMES[i % len(NAMES)], args)] + ([("second", {"k": i})] if i % 2 else [])
        text = "".join(f"[TOOL_CALLS]{n}[ARGS]{json.dumps(a, ensure_ascii=i % 3 == 0)}" for n, a in calls)
        cases.append(
            (
                CONTENT[i % len(CONTENT)] + text + (" done" if i % 3 == 1 else ""),
                CONTENT[i % len(CONTENT)] + (" done" if i % 3 == 1 else ""),
                calls,
            )
        )
    cases += [
        ('[TOOL_CALLS]f[ARGS]{"s": "a \\" } ["}', "", [("f", {"s": 'a " } ['})]),
        ("[TOOL_CALLS]f[ARGS]", "", [("f", {})]),
        ('[TOOL_CALLS]cut[ARGS]{"a": [1', '[TOOL_CALLS]cut[ARGS]{"a": [1', []),
        ('[TOOL_CALLS]f[ARGS]{"a": 1e999}', '[TOOL_CALLS]f[ARGS]{"a": 1e999}', []),
        ('[TOOL_CALLS]f[ARGS]{"a": 1} and text', " and text", [("f", {"a": 1})]),
        # `[ARGS]` skipped as a special token: the name runs up to the JSON
        ('[TOOL_CALLS]add{"a": 3.5}[TOOL_CALLS]mul{"b": [6]}', "", [("add", {"a": 3.5}), ("mul", {"b": [6]})]),
        ('x{y[TOOL_CALLS]sh{"cmd": "re(r\'{}\')"} ok', "x{y ok", [("sh", {"cmd": "re(r'{}')"})]),
        ('[TOOL_CALLS]cut{"a": "b', '[TOOL_CALLS]cut{"a": "b', []),
        ('[TOOL_CALLS]two words{"a": 1}', '[TOOL_CALLS]two words{"a": 1}', []),
    ]
    return cases


def _py(value) -> str:
    return repr(value)


def pythonic_cases():
    cases = []
    for i, args in enumerate(ARGS * 5):
        name = NAMES[i % len(NAMES)]
        call = f"{name}({', '.join(f'{k}={_py(v)}' for k, v in args.items())})"
        lead = ["", " ", "\n"][i % 3]
        cases.append((f"{lead}[{call}]", "", [(name, args)]))
    cases += [
        ('[a(x=1), b(y="two")]', "", [("a", {"x": 1}), ("b", {"y": "two"})]),
        ("[a(), b(), c()]", "", [("a", {}), ("b", {}), ("c", {})]),
        ("[f(s='it\\'s (fine)')]", "", [("f", {"s": "it's (fine)"})]),
        (
            "[f(x=[1, (2, 3)])] trailing",
            " trailing",
            [("f", {"x": [1, [2, 3]]})],
        ),  # tuples are not JSON: f(x=[1, [2, 3]])
        ("plain text", "plain text", []),
        ("[1, 2, 3]", "[1, 2, 3]", []),
        ("[not a call]", "[not a call]", []),
        ("[f(1)]", "[f(1)]", []),  # positional arguments are not tool calls
        ("[f(x=1e999)]", "[f(x=1e999)]", []),  # inf is not JSON
        ("[f(a=1), g(2), h(b='x')]", "", [("f", {"a": 1}), ("h", {"b": "x"})]),  # the bad element alone is dropped
        ("[f(a=1), g(b=), h(c=2)]", "", [("f", {"a": 1}), ("h", {"c": 2})]),
        ("<|python_start|>[f(a=1)]<|python_end|>", "", [("f", {"a": 1})]),
        ("<|python_start|>f(a=1)<|python_end|>", "", [("f", {"a": 1})]),
        ("Let me look that up. [f(a=1)]", "Let me look that up. ", [("f", {"a": 1})]),
        ("See [the docs](x) first", "See [the docs](x) first", []),
        ("", "", []),
    ]
    return cases


def think_cases():
    """(output, reasoning_started, expected reasoning, expected content)."""
    reasons = ["", "Let me think.", "a < b, 2 </thi nk", "multi\nline\n", "你好 🎉"]
    contents = ["", "Answer: 42", "\n\nFinal <b>bold</b>", "</think> twice"]
    cases = []
    for reasoning, content in itertools.product(reasons, contents):
        cases.append((f"<think>{reasoning}</think>{content}", False, reasoning, content))
        cases.append((f"{reasoning}</think>{content}", True, reasoning, content))
    cases += [
        ("no reasoning at all", False, "", "no reasoning at all"),
        ("  <think>lead space</think>x", False, "lead space", "x"),
        ("<think>cut off by length", False, "cut off by length", ""),
        ("still thinking", True, "still thinking", ""),
        ("text <think>late</think>", False, "", "text <think>late</think>"),
        ("<thin", False, "", "<thin"),
        # the prompt opened the block and the model opened it again: the repeated tag is not reasoning
        ("<think>again</think>x", True, "again", "x"),
        ("\n<think>again</think>x", True, "again", "x"),
        ("<think>", True, "", ""),
        ("\n\nleading blank lines</think>x", True, "\n\nleading blank lines", "x"),
    ]
    return cases
