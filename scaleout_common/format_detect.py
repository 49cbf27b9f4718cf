"""Which parsers a chat template implies (render, to know the tool-call format it constrains; derender, its
default parsers), from tags only that format writes (most specific first: Qwen3-Coder's
template also names `<tool_call>`, so `<function=` is looked for before it). Without a telling tag: hermes
for tools, no reasoning parser."""

from __future__ import annotations

import json

# (tags that must all appear in the template, parser name), first match wins
TOOL_RULES = [
    (("<seed:tool_call>",), "seed_oss"),
    (("<｜GCML｜tool_calls>",), "gigachat35"),
    (("<|tool_response:begin|>", "<|tool_response:name|>", "<|tool_response:result|>"), "solar_open"),
    (("｜DSML｜", "function_calls"), "deepseek_v32"),  # V3.2 writes `<{{ dsml_token }}function_calls>`
    (("｜DSML｜", "tool_calls"), "deepseek_v4"),
    (("<iquest_tool_call>",), "iquest_q1"),  # GLM's <arg_key> pairs inside
    (("<param_key>",), "telechat4"),  # in hermes' <tool_call>
    (("<tool_calls>", "<tool_sep>", "<arg_key>"), "hy_v3"),  # before GLM's <arg_key> and Hunyuan-A13B's <tool_calls>
    (("<tool_calls>", "<arg_key>"), "hy_v4"),
    (("<ifm|tool_calls>",), "k2_horizon"),
    (("<|content_invoke_tool_json|>",), "inkling"),
    (("<atem:function_calls>", "MuseGlimmer"), "muse_glimmer"),
    (("<atem:function_calls>",), "muse"),
    (("<|plamo:begin_tool_requests:plamo|>",), "plamo3"),
    (("<function=", "<parameter="), "qwen3_coder"),
    (("<arg_key>",), "glm45"),
    (("]<]minimax[>[",), "minimax_m3"),
    (("<dots_function_call>",), "dots"),
    (("<minimax:tool_call>",), "minimax_m2"),
    (("<｜tool▁calls▁begin｜>", "```json"), "deepseek_v3"),
    (("<｜tool▁calls▁begin｜>",), "deepseek_v31"),
    (("<|tool_calls_section_begin|>",), "kimi_k2"),
    (("<｜tool_calls_begin｜>", "steptml:invoke"), "step3"),
    (("<|open|>", "<|close|>", "<|sep|>"), "kimi_k3"),
    (("<|START_ACTION|>", "<|START_TEXT|>"), "cohere_command4"),
    (("<|START_ACTION|>",), "cohere_command3"),
    (("<|channel|>", "<|message|>"), "harmony"),  # gpt-oss's template writes no <|constrain|>
    (("<|role_sep|>", "function call"), "gigachat3"),
    (("<|tools_prefix|>",), "apertus"),
    (("<|tool_call|>",), "granite"),
    (("<TOOLCALL>",), "nemotron_v2"),
    (("<tool_calls>", "[BEGIN FINAL RESPONSE]"), "apriel"),  # its prompt also names <tool_call>
    (("<tool_calls>",), "hunyuan_a13b"),
    (("<|tool_call>", '<|"|>'), "gemma4"),
    (("<start_function_call>",), "functiongemma"),
    (("```tool_code",), "gemma"),
    (("<longcat_tool_call>",), "longcat"),
    (("<use_mcp_tool>",), "mirothinker"),  # its template also names hermes' <tool_call>
    (("<|action_start|><|plugin|>",), "internlm"),
    (("<function_call>",), "granite-20b-fc"),
    (("<|tool_call_start|>",), "lfm2"),
    (("<function_calls>",), "olmo3"),
    (("xLAM",), "xlam"),
    (("<tool_call>",), "hermes"),
    (("<function=", "<|python_tag|>"), "functionary_v3_1"),
    (("<|python_tag|>",), "llama3_json"),
    ((">>>all",), "functionary_v3_2"),
    (("functools[",), "phi4_mini_json"),
    (("<|python_start|>",), "pythonic"),
    (("[func_name1(",), "pythonic"),
    (("[TOOL_CALLS]",), "mistral"),
]
REASONING_RULES = [
    (("<|channel|>", "analysis"), "harmony"),
    (("◁think▷",), "kimi"),
    (("<|tool_response:begin|>", "<|tool_response:name|>", "<|tool_response:result|>"), "solar_open"),
    (("<|open|>", "<|close|>", "<|sep|>"), "kimi_k3"),
    (("<|START_THINKING|>", "<|START_TEXT|>"), "cohere_command4"),
    (("<|START_THINKING|>",), "cohere_command3"),
    (("<ifm|think>",), "k2_horizon"),
    (("<|content_thinking|>",), "inkling"),
    (("<atem:function_calls>", "MuseGlimmer"), "muse_glimmer"),
    (("<atem:function_calls>",), "muse"),
    (("<|plamo:begin_think:plamo|>",), "plamo3"),
    (("<|inner_prefix|>",), "apertus2509"),
    (("[BEGIN FINAL RESPONSE]",), "apriel"),
    (("<mm:think>",), "minimax_m3"),
    (("<seed:think>",), "seed_oss"),
    (("[THINK]",), "mistral"),
    (("<|channel>", "<channel|>"), "gemma4"),
    (("<unused94>",), "gemma"),
    (("thought process",), "granite"),
    (("<think>", "<answer>"), "hunyuan"),
    (("<think>", "<minimax:tool_call>"), "minimax_m2"),
    (("<think>", "<TOOLCALL>"), "nemotron_v2"),
    (("<think>", "<param_key>"), "telechat4"),
    (("<think>", "<_bot>"), "telechat4"),  # TeleChat's role tag (its JSON calls are hermes', which render constrains)
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
