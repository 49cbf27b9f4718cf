"""Reasoning formats: (output, reasoning_started, expected reasoning, expected content); at least 40 each."""

from __future__ import annotations

import itertools

from tests.derender.case_kit import H, K

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
        "deepseek_v4": think_family(forced=True, extra=[
            ("plan<｜DSML｜tool_calls>\n<｜DSML｜invoke", False, "plan", "<｜DSML｜tool_calls>\n<｜DSML｜invoke"),
            ("<think>plan<｜DSML｜tool>", False, "plan", "<｜DSML｜tool>"),
        ]),
        "deepseek_v41": think_family(forced=True, extra=[("plan<｜DSML｜ calls>", False, "plan", "<｜DSML｜ calls>")]),
        "qwen3-thinking": think_family(forced=True, extra=[
            ("plan<tool_call>{}</tool_call>", False, "plan", "<tool_call>{}</tool_call>"),
        ]),
        "glm45": think_family(extra=[
            ("\n<think>x</think>\ny", False, "x", "\ny"),
            ("<think>plan<tool_call>f<arg_key>a</arg_key>", False, "plan", "<tool_call>f<arg_key>a</arg_key>"),
            ("plan<tool_call>f</tool_call>", True, "plan", "<tool_call>f</tool_call>"),
        ]),
        "kimi": think_family("◁think▷", "◁/think▷"),
        "kimi_k3": think_family("<|open|>think<|sep|>", "<|close|>think<|sep|>", forced=True, extra=[
            ("plan<|close|>think<|sep|><|open|>response<|sep|>Hi.<|close|>response<|sep|>", False, "plan", "Hi."),
            ("<|open|>response<|sep|>No thinking.<|close|>response<|sep|>", False, "", "No thinking."),
            ("plan<|open|>tools<|sep|>", False, "plan", "<|open|>tools<|sep|>"),
        ]),
        "minimax_m3": think_family("<mm:think>", "</mm:think>", extra=[
            ("<mm:think>plan]<]minimax[>[<tool_call>", False, "plan", "]<]minimax[>[<tool_call>"),
        ]),
        "ernie45": think_family(extra=[
            ("abc\n</think>\n\n\n<response>\ndef\n</response>", True, "abc\n", "\ndef\n"),
            ("<think>abc</think><response>x</response>", False, "abc", "x"),
            ("<think>abc</think>\n<response>cut off", False, "abc", "cut off"),
        ]),
        "kimi_k2": think_family(extra=[
            (f"<think>plan{K[0]}{K[1]}", False, "plan", f"{K[0]}{K[1]}"),
            ("plan<|tool_call_section_begin|>x", True, "plan", "<|tool_call_section_begin|>x"),
        ]),
        "nemotron_v3": think_family(extra=[("<think>plan<tool_call>{}", False, "plan", "<tool_call>{}")]),
        "nemotron": think_family(),
        # vLLM's grammars: each family's tool-call opener ends the block too
        "minimax_m2": think_family(forced=True, extra=[
            ('plan<minimax:tool_call>\n<invoke name="f">', False, "plan", '<minimax:tool_call>\n<invoke name="f">'),
            ("<think>plan\n<minimax:tool_call>", True, "plan\n", "<minimax:tool_call>"),
        ]),
        "step3p5": think_family(forced=True, extra=[
            ("plan<tool_call>\n<function=f>", False, "plan", "<tool_call>\n<function=f>"),
        ]),
        "seed_oss": think_family("<seed:think>", "</seed:think>", extra=[
            ("<seed:think>plan<seed:tool_call>x", False, "plan", "<seed:tool_call>x"),
        ]),
        "mistral": think_family("[THINK]", "[/THINK]", extra=[
            ('[THINK]plan[TOOL_CALLS]f[ARGS]{"a": 1}', False, "plan", '[TOOL_CALLS]f[ARGS]{"a": 1}'),
            ("plan[TOOL_CALLS]", True, "plan", "[TOOL_CALLS]"),
        ]),
        "granite": _reasoning(
            lambda r, c: f"Here is my thought process:{r}Here is my response:{c}",
            None,
            [(f"Here's my thought process:{r}Here's my response:{c}", False, r, c) for r, c in itertools.product(REASONS, ANSWERS)]
            + [("This is content", False, "", "This is content")]
            + [(f"<think>{r}</think><response>{c}</response>", False, r, c) for r, c in itertools.product(REASONS, ANSWERS)]
            + [("<think>plan</think>\n<response>cut off", False, "plan", "cut off")],  # Granite 3.3 (llama.cpp)
        ),
        "hunyuan": _reasoning(
            lambda r, c: f"<think>\n{r}\n</think>\n<answer>\n{c}\n</answer>",
            lambda r, c: f"{r}\n</think>\n<answer>\n{c}\n</answer>",
            [
                ("no tags", False, "", "no tags"),
                ("<think>\nx\n</think>\ny", False, "x", "y"),
                ("<think>\nplan <tool_calls>[]</tool_calls>", False, "plan ", "<tool_calls>[]</tool_calls>"),
            ],
        ),
        "gemma": _reasoning(
            lambda r, c: f"<unused94>thought\n{r}<unused95>{c}",
            None,
            [("no thought", False, "", "no thought"), ("<unused94>cut", False, "cut", "")]
            + [(f"<unused94>thought{r}<unused95>{c}", False, r, c) for r, c in itertools.product(REASONS, ANSWERS)],
        ),
        "gemma4": _reasoning(
            lambda r, c: f"<|channel>thought\n{r}<channel|>{c}",
            lambda r, c: f"{r}<channel|>{c}",
            [
                ("no thought", False, "", "no thought"),
                ("thought about it", False, "", "thought about it"),
                ("thought\nbare label<channel|>x", False, "bare label", "x"),
                ("<|channel>thought\nplan<|tool_call>call:f{}", False, "plan", "<|tool_call>call:f{}"),
                ("<|channel>cut", False, "cut", ""),
            ],
        ),
        "minimax_append_think": [
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
