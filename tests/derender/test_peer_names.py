"""Every parser name the peers register is served: vLLM 0.33's (its ReasoningParserManager and ToolParserManager,
read from its venv) and SGLang's (`ReasoningParser.DetectorMap`, `FunctionCallParser.ToolCallParserEnum`), as
static lists so the check needs neither peer installed. SGLang's are the union over the sgl-project/sglang commits
named below (its newest branches each add a model: TeleChat4 42fad280, Xing4.0 7e31bbe6, XingChen4 bd41fb02,
Spark 3 17049d56, BerryLM 49619a40; names files 0a933a22, 042de61b). llama.cpp's newest common/chat.h (0232d960)
names no model formats (CONTENT_ONLY, PEG_SIMPLE, PEG_NATIVE); its enum before the PEG parsers did, and each of
those maps to a parser of ours here."""

from __future__ import annotations

import pytest

from derender_svc.parsers import REASONING_PARSERS, TOOL_PARSERS

VLLM_033_REASONING = [
    "beam", "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4", "deepseek_v41",
    "ernie45", "gemma4", "glm45", "glm47", "granite", "granite_thinking_parser", "hf", "holo2", "hunyuan_a13b",
    "hy_v3", "hy_v4", "inkling", "k2_horizon", "kimi_k2", "kimi_k3", "ling3", "mimo", "minicpmv", "minimax_m2",
    "minimax_m2_append_think", "minimax_m3", "mistral", "muse", "muse_glimmer", "musespark1x", "nemotron_v3",
    "olmo3", "openai_gptoss", "plamo3", "poolside_v1", "qwen3", "seed_oss", "step3", "step3p5", "step5",
]  # fmt: skip
VLLM_033_TOOLS = [
    "apertus", "beam", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31", "deepseek_v32",
    "deepseek_v4", "deepseek_v41", "dots", "ernie45", "functiongemma", "gemma4", "gigachat3", "glm45", "glm47",
    "granite", "granite-20b-fc", "granite4", "hermes", "hf", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling", "internlm",
    "jamba", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3_json", "llama4_json", "llama4_pythonic",
    "longcat", "mimo", "minicpm5", "minimax_m2", "minimax_m3", "mistral", "muse", "muse_glimmer", "musespark1x",
    "olmo3", "openai", "phi4_mini_json", "plamo3", "poolside_v1", "pythonic", "qwen3_coder", "qwen3_json",
    "qwen3_xml", "seed_oss", "step3", "step3p5", "step5", "xlam",
]  # fmt: skip
SGLANG_REASONING = [
    "apertus2509", "berrylm", "cohere_command4", "deepseek-r1", "deepseek-v3", "deepseek-v4", "deepseek-v41", "dots",
    "gemma4", "gigachat35", "glm45", "gpt-oss", "granite_thinking_parser", "hunyuan", "inkling", "interns1",
    "iquest_q1", "k2_horizon", "kimi", "kimi_k2", "kimi_k3", "ling3", "mimo", "minimax", "minimax-append-think",
    "minimax-m3", "mistral", "muse", "nanbeige", "nemotron_3", "plamo3", "poolside_v1", "qwen3", "qwen3-thinking",
    "step3", "step3p5", "telechat4", "xing4_0", "xingchen4",
]  # fmt: skip
SGLANG_TOOLS = [
    "apertus2509", "berrylm", "cohere_command4", "deepseekv3", "deepseekv31", "deepseekv32", "deepseekv4",
    "deepseekv41", "dots", "gemma4", "gigachat3", "gigachat35", "glm", "glm45", "glm47", "glm53", "gpt-oss", "hermes",
    "hunyuan", "inkling", "interns1", "iquest_q1", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3",
    "mimo", "minicpm5", "minimax-m2", "minimax-m3", "mistral", "muse", "nanbeige", "poolside_v1", "pythonic", "qwen",
    "qwen25", "qwen3_coder", "spark", "spark25", "step3", "step3p5", "telechat4", "trinity", "xing4_0", "xingchen4",
]  # fmt: skip
# llama.cpp's COMMON_CHAT_FORMAT_* (common/chat.h before the PEG parsers) -> the tool parser that reads it
LLAMA_CPP_FORMATS = {
    "GENERIC": "generic", "MISTRAL_NEMO": "mistral", "MAGISTRAL": "mistral", "LLAMA_3_X": "llama3_json",
    "LLAMA_3_X_WITH_BUILTIN_TOOLS": "llama3_json", "DEEPSEEK_R1": "deepseek_v3", "FIREFUNCTION_V2": "firefunction_v2",
    "FUNCTIONARY_V3_2": "functionary_v3_2", "FUNCTIONARY_V3_1_LLAMA_3_1": "functionary_v3_1",
    "DEEPSEEK_V3_1": "deepseek_v31", "HERMES_2_PRO": "hermes", "COMMAND_R7B": "command_r7b", "GRANITE": "granite",
    "GPT_OSS": "harmony", "SEED_OSS": "seed_oss", "NEMOTRON_V2": "nemotron_v2", "APERTUS": "apertus",
    "LFM2_WITH_JSON_TOOLS": "lfm2", "GLM_4_5": "glm45", "MINIMAX_M2": "minimax_m2", "KIMI_K2": "kimi_k2",
    "QWEN3_CODER_XML": "qwen3_coder", "APRIEL_1_5": "apriel", "XIAOMI_MIMO": "mimo", "SOLAR_OPEN": "solar_open",
    "EXAONE_MOE": "hermes",  # <think> then <tool_call>{...}</tool_call> blocks
}  # fmt: skip


@pytest.mark.parametrize(
    "names,served",
    [
        (VLLM_033_REASONING, REASONING_PARSERS),
        (VLLM_033_TOOLS, TOOL_PARSERS),
        (SGLANG_REASONING, REASONING_PARSERS),
        (SGLANG_TOOLS, TOOL_PARSERS),
    ],
    ids=["vllm-reasoning", "vllm-tools", "sglang-reasoning", "sglang-tools"],
)
def test_every_peer_name_is_served(names, served):
    assert sorted(set(names) - set(served)) == []


def test_every_llama_cpp_format_has_a_parser():
    assert sorted(set(LLAMA_CPP_FORMATS.values()) - set(TOOL_PARSERS)) == []
