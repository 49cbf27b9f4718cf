"""Auto-detection of the formats added after the first families, each against lines of a real chat template
(quoted as the template source writes them, with the tags of earlier rules the same template also holds, so a
rule that would steal it shows here). Where no public template was found, the lines are the format's own
output as the model's parser reads it (marked)."""

from __future__ import annotations

import pytest

from derender_svc.parsers import REASONING_PARSERS, TOOL_PARSERS
from scaleout_common.format_detect import reasoning_parser_for, tool_parser_for

# (template lines, tool parser, reasoning parser)
TEMPLATES = {
    # llama.cpp models/templates/GigaChat3.5.jinja
    "gigachat35": ("{{- '<｜GCML｜tool_calls>\\n' -}}{{- '<｜GCML｜invoke name=\"' ~ inner['name'] ~ '\">\\n' -}}"
                   "role_sep=\"<|role_sep|>\\n\", {%- elif message['role'] in ['function call', 'reasoning function call']"
                   " {{- 'assistant' + add_tokens.role_sep + '<think>' -}}", "gigachat35", "think"),
    # llama.cpp models/templates/GigaChat3-10B-A1.8B.jinja
    "gigachat3": ("role_sep=\"<|role_sep|>\\n\", message_sep=\"<|message_sep|>\\n\\n\" 'role': 'function call', "
                  "'content': '{\"name\": \"' ~ call['name'] ~ '\", \"arguments\": ' ~ arguments ~ '}'", "gigachat3",
                  "none"),
    # llama.cpp models/templates/DeepSeek-V3.2.jinja
    "deepseek_v32": ("{%- set dsml_token = \"｜DSML｜\" -%} {%- set thinking_start_token = \"<think>\" -%} "
                     "<{{ dsml_token }}function_calls>\\n<{{ dsml_token }}invoke name=\"$FUNCTION_NAME\">"
                     "{%- if message.get('tool_calls') -%}", "deepseek_v32", "think"),
    # DeepSeek-V4's encoding (no public jinja): its section tag
    "deepseek_v4": ("<｜DSML｜tool_calls>\\n<｜DSML｜invoke name=\"f\">", "deepseek_v4", "none"),
    # vLLM examples/tool_chat_template_apertus.jinja
    "apertus": ("{%- set inner_token = '<|inner_prefix|>' -%}{%- set outer_token = '<|inner_suffix|>' -%}"
                "{%- set tool_calls_token = '<|tools_prefix|>' -%}", "apertus", "apertus2509"),
    # llama.cpp models/templates/Kimi-K3.jinja
    "kimi_k3": ("{{- '<|open|>' + tag -}} {{- '<|sep|>' -}} {{- '<|close|>' + tag + '<|sep|>' -}} "
                "Here are the available tools, described in JSONSchema.\\n\\n```json\\n {{- open_tag('think') -}}",
                "kimi_k3", "kimi_k3"),
    # llama.cpp models/templates/NVIDIA-Nemotron-Nano-v2.jinja
    "nemotron_v2": ("{{- '<TOOLCALL>[{{\"name\": \"tool_name1\", \"arguments\": \"tool_args1\"}}, ' -}} "
                    "{{- '<think>\\n\\n' -}} {%- set content = (content.split('</think>')[1]", "nemotron_v2",
                    "nemotron_v2"),
    # llama.cpp models/templates/unsloth-Apriel-1.5.jinja
    "apriel": ("Return all function calls as a list of json objects within <tool_call></tool_call> XML tags. "
               "<tool_calls>[{\"name\": <function-name-1>, \"arguments\": <args-dict-1>}] the final solution in the "
               "following format: [BEGIN FINAL RESPONSE] ... [END FINAL RESPONSE]. <thinking>", "apriel", "apriel"),
    # llama.cpp models/templates/meetkai-functionary-medium-v3.1.jinja
    "functionary_v3_1": ("{{ '<|python_tag|>' + tool_call['function']['arguments'] }} {{ '<function=' + "
                         "tool_call['function']['name'] + '>' + tool_call['function']['arguments'] + '</function>' }}",
                         "functionary_v3_1", "none"),
    # llama.cpp models/templates/meetkai-functionary-medium-v3.2.jinja
    "functionary_v3_2": ("Ask for the required input to:recipient==all\\nRespond in this format:\\n>>>${recipient}\\n"
                         "{{ '>>>all\\n' + message['content'] }} {{ '>>>' + tool_call['function']['name'] + '\\n' }}",
                         "functionary_v3_2", "none"),
    # vLLM examples/tool_chat_template_phi4_mini.jinja
    "phi4_mini_json": ("formatted as functools[{\"name\": [function name], \"arguments\": [function arguments as "
                       "JSON]}, ...]", "phi4_mini_json", "none"),
    # vLLM examples/tool_chat_template_internlm2_tool.jinja
    "internlm": ("{{- \"<|im_start|>system name=<|plugin|>\\n[\" }} {{- \"<|action_start|><|plugin|>\\n\" }}",
                 "internlm", "none"),
    # vLLM examples/tool_chat_template_granite_20b_fc.jinja
    "granite-20b-fc": ("<|function_call_library|> {{- '<function_call> ' + {'name': tc.function.name} }}",
                       "granite-20b-fc", "none"),
    # llama.cpp models/templates/LFM2.5-8B-A1B.jinja
    "lfm2": ("{{- \"<|tool_call_start|>[\" + (tool_calls_ns.tool_calls | join(\", \")) + \"]<|tool_call_end|>\" -}}"
             " {{- \"<think>\" + message.thinking + \"</think>\" -}}", "lfm2", "think"),
    # llama.cpp models/templates/llama-cpp-lfm2.jinja (JSON calls in the same tags)
    "lfm2_json": ("List of tools: <|tool_list_start|>[\" {%- set content = \"<|tool_call_start|>[\" + ns_tc.result + "
                  "\"]<|tool_call_end|>\" + content -%}", "lfm2", "none"),
    # vLLM examples/tool_chat_template_olmo3.jinja
    "olmo3": ("{{- \"<|im_start|>assistant\\n<function_calls>\\n\" }}", "olmo3", "none"),
    # vLLM examples/tool_chat_template_xlam_llama.jinja
    "xlam": ("You are a helpful assistant. You are developed by Salesforce xLAM team. make calls in a single JSON "
             "array: [{\"name\": \"tool_call_name\"", "xlam", "none"),
    # llama.cpp models/templates/ibm-granite-granite-3.3-2B-Instruct.jinja
    "granite": ("respond only with <|tool_call|> followed by a JSON list of tools used. In the thought process, engage "
                "in a comprehensive cycle Write your thoughts between <think></think> and write your response between "
                "<response></response> for each user query.", "granite", "granite"),
    # llama.cpp models/templates/MiroThinker-v1.jinja
    "mirothinker": ("{{- \"\\n<use_mcp_tool>\" }} {{- \"\\n<server_name>\" }} {{- '<|im_start|>' + message.role + "
                    "'\\n<think>\\n' }} {{- '<tool_call>\\n{\"name\": \"' }}", "mirothinker", "qwen3"),
    # upstage-Solar-Open-100B.jinja (an LFS file in the mirrors): the tags llama.cpp's chat.cpp finds it by
    "solar_open": ("<|tool_response:begin|>{{ name }}<|tool_response:name|>{{ result }}<|tool_response:result|>",
                   "solar_open", "solar_open"),
    # llama.cpp models/templates/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja
    "command_r7b": ("0. Start by writing <|START_THINKING|> followed by a detailed step by step plan 1. Action: write "
                    "<|START_ACTION|> followed by a list of JSON-formatted tool calls 4. Response: then break out of "
                    "the loop and write <|START_RESPONSE|> ```json\n[", "cohere_command3", "cohere_command3"),
    # Command A Reasoning's answer block, as SGLang's cohere_command4 detector describes its template
    "cohere_command4": ("<|START_THINKING|>{{ r }}<|END_THINKING|><|START_TEXT|>{{ c }}<|END_TEXT|> <|START_ACTION|>",
                        "cohere_command4", "cohere_command4"),
    # the formats' own tags (their templates were not found)
    "iquest_q1": ("<iquest_tool_call>f\\n<arg_key>a</arg_key><arg_value>1</arg_value></iquest_tool_call>",
                  "iquest_q1", "none"),
    "minimax_m3": ("]<]minimax[>[<tool_call> <mm:think>", "minimax_m3", "minimax_m3"),
    # Tele-AI/TeleChat2-7B's chat_template (its <tool_call> tags, token 9, restored: the copy found had dropped
    # them); TeleChat4's own template was not found, so its line below is marked as our reading
    "telechat2": ("{{- '<_system>' + messages[0]['content'] + '\\n' }} {{- '<_bot>' }} {{- '<tool_call>\\n{\"name\": \"' }}"
                  "{{ tool_call.name }} {{- '\", \"arguments\": ' }} {{- '}\\n</tool_call>' }} {{- '<_end>\\n' }}",
                  "hermes", "none"),
    # (not a quote) TeleChat's role tag and the <think> SGLang's TeleChat4Detector says its template writes
    "telechat4_thinking": ("{{- '<_bot>' }}{%- if enable_thinking %}{{- '<think>\\n' }}{%- endif %}", "hermes",
                           "telechat4"),
    "telechat4": ("<tool_call>{{ name }}<param_key>{{ k }}</param_key><param_value>{{ v }}</param_value></tool_call>"
                  " <think>", "telechat4", "telechat4"),
    "dots": ("<dots_function_call><invoke name=\"f\">", "dots", "none"),
    "longcat": ("<longcat_tool_call>\\n{\"name\": ...}\\n</longcat_tool_call>", "longcat", "none"),
    # vLLM examples/tool_chat_template_muse_glimmer.jinja
    "muse_glimmer": ("{{- '<atem:function_calls>\\n<atem:invoke name=\"' + tc.function.name + '\">\\n' -}} raise_exception("
                     "'MuseGlimmer ATEM chat template requires') {{- '<|start|>assistant to=self<|message|>' + "
                     "message['reasoning_content'] + '<|eom|>' -}}", "muse_glimmer", "muse_glimmer"),
    # Muse Spark: the same calls without Glimmer's name (no public template found)
    "muse": ("<|start|>assistant to=f<|message|><atem:function_calls><atem:invoke name=\"f\">", "muse", "muse"),
    # vLLM 0.33's formats, by their parsers' tags (no template found)
    "inkling": ("<|message_model|><|content_thinking|>{{ r }}<|end_message|><|message_model|>f"
                "<|content_invoke_tool_json|>{{ call }}<|end_message|>", "inkling", "inkling"),
    "hy_v3": ("<tool_calls><tool_call>f<tool_sep><arg_key>k</arg_key><arg_value>v</arg_value></tool_call></tool_calls>",
              "hy_v3", "none"),
    "hy_v4": ("<tool_calls><tool_call>f<arg_key>k</arg_key><arg_value>v</arg_value></tool_call></tool_calls>", "hy_v4",
              "none"),
    "k2_horizon": ("<ifm|think>{{ r }}</ifm|think><ifm|tool_calls><ifm|tool_call>f<ifm|arg_key>", "k2_horizon",
                   "k2_horizon"),
    "plamo3": ("<|plamo:begin_think:plamo|>{{ r }}<|plamo:end_think:plamo|><|plamo:begin_tool_requests:plamo|>",
               "plamo3", "plamo3"),
    "step3": ("<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"f\">",
              "step3", "none"),
}  # fmt: skip


@pytest.mark.parametrize("template,tool,reasoning", TEMPLATES.values(), ids=list(TEMPLATES))
def test_template_formats(template, tool, reasoning):
    assert (tool_parser_for(template), reasoning_parser_for(template)) == (tool, reasoning)
    assert tool in TOOL_PARSERS and (reasoning == "none" or reasoning in REASONING_PARSERS)
