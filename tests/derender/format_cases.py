"""Cases for the formats added after the first four, written from each format's public documentation and
model cards, by family: cases_tagged.py, cases_json.py, cases_reasoning.py (shared pieces in case_kit.py)."""

from __future__ import annotations

from tests.derender.case_kit import DS, TOOLS, H, K  # noqa: F401
from tests.derender.cases_json import (
    gemma4_cases,
    gemma_cases,
    granite_cases,
    harmony_tool_cases,
    hunyuan_cases,
    longcat_cases,
    minimax_cases,
    qwen25_coder_cases,
)
from tests.derender.cases_other import (
    apertus_cases,
    gigachat3_cases,
    granite_20b_fc_cases,
    internlm_cases,
    kimi_k3_cases,
    lfm2_cases,
    minimax_m3_cases,
    olmo3_cases,
    phi4_mini_cases,
    xlam_cases,
)
from tests.derender.cases_peers import REASONING_FORMATS as PEER_REASONING
from tests.derender.cases_peers import TOOL_FORMATS as PEER_TOOLS
from tests.derender.cases_reasoning import reasoning_formats as family_reasoning
from tests.derender.cases_sglang import REASONING_FORMATS as SGLANG_REASONING
from tests.derender.cases_sglang import TOOL_FORMATS as SGLANG_TOOLS
from tests.derender.cases_tagged import (
    deepseek_v3_cases,
    deepseek_v4_cases,
    deepseek_v31_cases,
    deepseek_v32_cases,
    deepseek_v41_cases,
    dots_cases,
    glm45_cases,
    kimi_k2_cases,
    mimo_cases,
    minimax_m2_cases,
    qwen3_coder_cases,
    seed_oss_cases,
    step3_cases,
)
from tests.derender.cases_vllm033 import TOOL_FORMATS as VLLM033_TOOLS
from tests.derender.cases_vllm033 import reasoning_cases as vllm033_reasoning

TOOL_FORMATS = {
    "qwen3_coder": qwen3_coder_cases,
    "seed_oss": seed_oss_cases,
    "mimo": mimo_cases,
    "glm45": glm45_cases,
    "minimax_m2": minimax_m2_cases,
    "dots": dots_cases,
    "deepseek_v3": deepseek_v3_cases,
    "deepseek_v31": deepseek_v31_cases,
    "kimi_k2": kimi_k2_cases,
    "deepseek_v32": deepseek_v32_cases,
    "deepseek_v4": deepseek_v4_cases,
    "deepseek_v41": deepseek_v41_cases,
    "step3": step3_cases,
    "longcat": longcat_cases,
    "phi4_mini_json": phi4_mini_cases,
    "internlm": internlm_cases,
    "granite-20b-fc": granite_20b_fc_cases,
    "lfm2": lfm2_cases,
    "olmo3": olmo3_cases,
    "xlam": xlam_cases,
    "apertus": apertus_cases,
    "gigachat3": gigachat3_cases,
    "minimax_m3": minimax_m3_cases,
    "kimi_k3": kimi_k3_cases,
    "granite": granite_cases,
    "hunyuan_a13b": hunyuan_cases,
    "minimax": minimax_cases,
    "qwen2_5_coder": qwen25_coder_cases,
    "gemma": gemma_cases,
    "gemma4": gemma4_cases,
    "harmony": harmony_tool_cases,
    **PEER_TOOLS,
    **SGLANG_TOOLS,
    **VLLM033_TOOLS,
}


def reasoning_formats() -> dict:
    return {**family_reasoning(), **PEER_REASONING, **SGLANG_REASONING, **vllm033_reasoning()}
