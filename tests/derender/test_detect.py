"""Parser auto-detection from chat-template snippets of each family."""

from __future__ import annotations

import pytest

from derender_svc.parsers import REASONING_PARSERS, TOOL_PARSERS
from scaleout_common.format_detect import reasoning_parser_for, tool_parser_for


@pytest.mark.parametrize(
    "template,tool",
    [
        ("<tool_call>\n<function=NAME>\n<parameter=P>\nvalue\n</parameter>\n</function>\n</tool_call>", "qwen3_coder"),
        (
            "<seed:tool_call>\n<function=NAME>\n<parameter=P>value</parameter>\n</function>\n</seed:tool_call>",
            "seed_oss",
        ),
        ("<tool_call>{{ tc.name }}<arg_key>{{ k }}</arg_key><arg_value>{{ v }}</arg_value></tool_call>", "glm45"),
        ('<minimax:tool_call>\n<invoke name="f">', "minimax_m2"),
        ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n", "deepseek_v3"),
        ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{{ name }}<｜tool▁sep｜>{{ args }}", "deepseek_v31"),
        ("<|tool_calls_section_begin|><|tool_call_begin|>", "kimi_k2"),
        ("<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>", "harmony"),
        ("<|start|>assistant to=functions.f<|channel|>commentary json<|message|>", "harmony"),  # gpt-oss's own
        ("<|tool_call|>[{{ calls }}]", "granite"),
        ("<tool_calls>[{{ calls }}]</tool_calls>", "hunyuan_a13b"),
        ("<|tool_call>call:{{ name }}{{ '{' }}k:<|\"|>v<|\"|>}<tool_call|>", "gemma4"),
        ("<start_function_call>call:{{ name }}{", "functiongemma"),
        ("```tool_code\n{{ call }}\n```", "gemma"),
        ("<tool_call>\n{{ tool_call | tojson }}\n</tool_call>", "hermes"),
        ("<|python_tag|>{{ call }}", "llama3_json"),
        ("<|python_start|>{{ call }}<|python_end|>", "pythonic"),
        ("[func_name1(params_name1=params_value1)]", "pythonic"),
        ("[TOOL_CALLS][{{ calls }}]", "mistral"),
        ("{{ messages }}", "hermes"),
        (None, "hermes"),
    ],
)
def test_tool_parser_for(template, tool):
    assert tool_parser_for(template) == tool
    assert tool in TOOL_PARSERS


@pytest.mark.parametrize(
    "template,reasoning",
    [
        ("<|channel|>analysis<|message|>", "harmony"),
        ("◁think▷", "kimi"),
        ("<seed:think>", "seed_oss"),
        ("[THINK]", "mistral"),
        ("<|channel>thought\n{{ thinking }}<channel|>", "gemma4"),
        ("<unused94>thought", "gemma"),
        ("Here is my thought process:", "granite"),
        ("<think>\n</think>\n<answer>", "hunyuan"),
        ("<think>\n<tool_call>", "qwen3"),
        ("<think>{{ r }}</think><|tool_calls_section_begin|>", "kimi_k2"),
        ("<｜Assistant｜><think>\n", "think"),
        ("{{ messages }}", "none"),
    ],
)
def test_reasoning_parser_for(template, reasoning):
    assert reasoning_parser_for(template) == reasoning
    assert reasoning == "none" or reasoning in REASONING_PARSERS
