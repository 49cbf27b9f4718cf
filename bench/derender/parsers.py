"""Streamed parse cost per token, per format, in process (section 4 of `python -m bench.derender`).

Each format gets an output of N tokens (4 characters a token): prose, then calls in the format until N (tool
formats), or reasoning then an answer (reasoning formats). Streamed: one parser fed one token at a time.
Replay: what a stateless client-side parser does, re-parsing the whole output so far on every chunk (timed on
every 64th chunk at 4,096 tokens and scaled, since all of it takes minutes). Flat means streamed cost per token
does not grow with the output; replay grows linearly.
"""

from __future__ import annotations

import json
import time

from derender_svc.parsers import REASONING_PARSERS, make_tool_parser

PROSE = "The weather in Zürich is mild today; 数据 and émojis 🎉 too. "
ARGS = json.dumps({"city": "São Paulo", "days": 3, "units": ["c", "f"], "note": 'a "quoted" } ['})
PLAIN = {"city": "São Paulo", "days": "3"}
DS, K = (
    ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"),
    (
        "<|tool_calls_section_begin|>",
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
    ),
)
_XML = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in PLAIN.items())
_GLM = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in PLAIN.items())
_M2 = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in PLAIN.items())
_OBJ = '{"name": "get_weather", "arguments": ' + ARGS + "}"
# format: (section opener, one call, section closer)
TOOL_SHAPES = {
    "hermes": ("", f"<tool_call>\n{_OBJ}\n</tool_call>\n", ""),
    "llama3_json": ("", '{"name": "get_weather", "parameters": ' + ARGS + "}; ", ""),
    "pythonic": ("[", 'get_weather(city="São Paulo", days=3, units=["c", "f"]), ', "]"),
    "mistral": ("[TOOL_CALLS][", _OBJ + ", ", "]"),
    "qwen3_coder": ("", f"<tool_call>\n<function=get_weather>\n{_XML}</function>\n</tool_call>\n", ""),
    "qwen2_5_coder": ("", f"<tools>\n{_OBJ}\n</tools>\n", ""),
    "deepseek_v3": (DS[0], f"{DS[1]}function{DS[2]}get_weather\n```json\n{ARGS}\n```{DS[3]}", "<｜tool▁calls▁end｜>"),
    "deepseek_v31": (DS[0], f"{DS[1]}get_weather{DS[2]}{ARGS}{DS[3]}", "<｜tool▁calls▁end｜>"),
    "kimi_k2": (K[0], f"{K[1]}functions.get_weather:0{K[2]}{ARGS}{K[3]}", "<|tool_calls_section_end|>"),
    "glm45": ("", f"<tool_call>get_weather\n{_GLM}</tool_call>\n", ""),
    "granite": ("<|tool_call|>[", _OBJ + ", ", "]"),
    "hunyuan_a13b": ("<tool_calls>[", _OBJ + ", ", "]</tool_calls>"),
    "minimax": ("<tool_calls>\n", _OBJ + "\n", "</tool_calls>"),
    "minimax_m2": ("<minimax:tool_call>\n", f'<invoke name="get_weather">\n{_M2}</invoke>\n', "</minimax:tool_call>"),
    "gemma": (
        "",
        "<start_function_call>call:get_weather{city:<escape>São Paulo<escape>,days:3}<end_function_call>",
        "",
    ),
    "harmony": (
        "",
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        + ARGS
        + "<|call|><|start|>assistant",
        "",
    ),
}
REASONING_SHAPES = {
    "think": ("<think>", "</think>"),
    "qwen3": ("<think>", "</think>"),
    "deepseek_r1": ("", "</think>"),
    "kimi": ("◁think▷", "◁/think▷"),
    "granite": ("Here is my thought process:", "Here is my response:"),
    "hunyuan": ("<think>\n", "\n</think>\n<answer>\n"),
    "gemma": ("<unused94>thought\n", "<unused95>"),
    "minimax": ("", "</think>"),
    "harmony": ("<|channel|>analysis<|message|>", "<|end|><|start|>assistant<|channel|>final<|message|>"),
}


def _repeat(text: str, size: int) -> str:
    return (text * (size // max(len(text), 1) + 1))[:size]


def tool_output(name: str, tokens: int) -> str:
    opener, call, closer = TOOL_SHAPES[name]
    size = tokens * 4
    calls = max(1, (size // 2) // len(call))
    body = opener + (call * calls).rstrip(", ") + closer
    return _repeat(PROSE, max(0, size - len(body))) + body


def reasoning_output(name: str, tokens: int) -> str:
    opener, closer = REASONING_SHAPES[name]
    half = tokens * 2
    return opener + _repeat(PROSE, half) + closer + _repeat(PROSE, tokens * 4 - half)


def _pieces(text: str) -> list[str]:
    return [text[i : i + 4] for i in range(0, len(text), 4)]


def _make(name: str, reasoning: bool):
    if reasoning:
        return lambda: REASONING_PARSERS[name].create(False)
    return lambda: make_tool_parser(name)


def streamed(make, pieces: list[str], repeat: int) -> float:
    """Best-of CPU microseconds per token, one parser fed token by token."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        parser = make()
        for i, piece in enumerate(pieces):
            parser.feed(piece, i == len(pieces) - 1)
        best = min(best, time.process_time() - start)
    return best * 1e6 / len(pieces)


def replay(make, pieces: list[str], every: int) -> float:
    """CPU microseconds per token when every chunk re-parses the output so far (every `every`-th chunk timed)."""
    text, spent = "", 0.0
    for i, piece in enumerate(pieces):
        text += piece
        if i % every == 0:
            start = time.process_time()
            make().feed(text, True)
            spent += time.process_time() - start
    return spent * every * 1e6 / len(pieces)


def run(repeat: int) -> None:
    print("4. parsers in process: streamed parse cost per token (1 token = 4 characters per feed)")
    print(
        f"   {'format':22s} {'512 tok':>9s} {'4096 tok':>9s} {'ratio':>6s}   {'replay 512':>11s} {'replay 4096':>12s}"
    )
    rows = [(name, False) for name in TOOL_SHAPES] + [(name, True) for name in REASONING_SHAPES]
    worst = 0.0
    for name, reasoning in rows:
        make = _make(name, reasoning)
        build = reasoning_output if reasoning else tool_output
        short, long = _pieces(build(name, 512)), _pieces(build(name, 4096))
        costs = [streamed(make, short, repeat * 4), streamed(make, long, repeat)]
        ratio = costs[1] / costs[0]
        worst = max(worst, ratio)
        baseline = [replay(make, short, 1), replay(make, long, 64)]
        label = ("reasoning " if reasoning else "tools ") + name
        print(
            f"   {label:22s} {costs[0]:7.2f}us {costs[1]:7.2f}us {ratio:5.2f}x   "
            f"{baseline[0]:9.1f}us {baseline[1]:10.1f}us"
        )
    print(f"   worst 4096/512 ratio: {worst:.2f}x (flat: within 1.5x)")
