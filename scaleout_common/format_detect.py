"""Which parsers a chat template implies (render, to know the tool-call format it constrains; derender, its
default parsers), from tags only that format writes (most specific first: Qwen3-Coder's
template also names `<tool_call>`, so `<function=` is looked for before it). Without a telling tag: hermes
for tools, no reasoning parser."""

from __future__ import annotations

import json

# (tags that must all appear in the template, parser name), first match wins
TOOL_RULES = [
    (("<seed:tool_call>",), "seed_oss"),
    (("<function=", "<parameter="), "qwen3_coder"),
    (("<arg_key>",), "glm45"),
    (("<minimax:tool_call>",), "minimax_m2"),
    (("<｜tool▁calls▁begin｜>", "```json"), "deepseek_v3"),
    (("<｜tool▁calls▁begin｜>",), "deepseek_v31"),
    (("<|tool_calls_section_begin|>",), "kimi_k2"),
    (("<|channel|>", "<|constrain|>"), "harmony"),
    (("<|tool_call|>",), "granite"),
    (("<tool_calls>",), "hunyuan_a13b"),
    (("<|tool_call>", '<|"|>'), "gemma4"),
    (("<start_function_call>",), "functiongemma"),
    (("```tool_code",), "gemma"),
    (("<tool_call>",), "hermes"),
    (("<|python_tag|>",), "llama3_json"),
    (("<|python_start|>",), "pythonic"),
    (("[func_name1(",), "pythonic"),
    (("[TOOL_CALLS]",), "mistral"),
]
REASONING_RULES = [
    (("<|channel|>", "analysis"), "harmony"),
    (("◁think▷",), "kimi"),
    (("<seed:think>",), "seed_oss"),
    (("[THINK]",), "mistral"),
    (("<|channel>", "<channel|>"), "gemma4"),
    (("<unused94>",), "gemma"),
    (("thought process",), "granite"),
    (("<think>", "<answer>"), "hunyuan"),
    (("<think>", "<minimax:tool_call>"), "minimax_m2"),
    (("<think>", "<tool_call>"), "qwen3"),
    (("<think>", "<|tool_calls_section_begin|>"), "kimi_k2"),
    (("<think>",), "think"),
]


def _text(template) -> str:
    return template if isinstance(template, str) else json.dumps(template or "", ensure_ascii=False)


def tool_parser_for(template) -> str:
    text = _text(template)
    return next((name for tags, name in TOOL_RULES if all(tag in text for tag in tags)), "hermes")


def reasoning_parser_for(template) -> str:
    text = _text(template)
    return next((name for tags, name in REASONING_RULES if all(tag in text for tag in tags)), "none")
