"""Parser registry: reasoning parsers and tool-call parsers by the names vLLM's `--reasoning-parser` and
`--tool-call-parser` use (plus a few SGLang spellings); "none" turns one off. The catalogue, with the model
families and what is auto-detected, is in docs/derender.md."""

from __future__ import annotations

from derender_svc.parsers.arg_calls import HyV3ToolParser, HyV4ToolParser, K2HorizonToolParser
from derender_svc.parsers.dsml import (
    DeepSeekV4ToolParser,
    DeepSeekV32ToolParser,
    DeepSeekV41ToolParser,
    GigaChat35ToolParser,
)
from derender_svc.parsers.functionary import FunctionaryV31ToolParser, FunctionaryV32ToolParser
from derender_svc.parsers.gemma import Gemma4ToolParser, GemmaToolParser
from derender_svc.parsers.generic import GenericToolParser
from derender_svc.parsers.glm53 import Glm53ToolParser
from derender_svc.parsers.harmony import HarmonyReasoningParser, HarmonyToolParser
from derender_svc.parsers.hermes import HermesToolParser, LongcatToolParser, TrinityToolParser
from derender_svc.parsers.hy_tags import HyV3ReasoningParser, HyV4ReasoningParser
from derender_svc.parsers.inkling import InklingReasoningParser, InklingToolParser
from derender_svc.parsers.json_blocks import (
    ApertusToolParser,
    GigaChat3ToolParser,
    Granite20bFcToolParser,
    GraniteToolParser,
    InternLmToolParser,
    MiroThinkerToolParser,
    NemotronV2ToolParser,
    Phi4MiniToolParser,
    Qwen25CoderToolParser,
    SolarOpenToolParser,
    ToolCallsBlockParser,
    XlamToolParser,
)
from derender_svc.parsers.llama3_json import Llama3JsonToolParser
from derender_svc.parsers.minimax_m3 import MiniMaxM3ToolParser
from derender_svc.parsers.mistral import MistralToolParser
from derender_svc.parsers.muse import (
    MuseGlimmerReasoningParser,
    MuseGlimmerToolParser,
    MuseReasoningParser,
    MuseToolParser,
)
from derender_svc.parsers.named import NamedToolParser
from derender_svc.parsers.pythonic import Lfm2ToolParser, Olmo3ToolParser, PythonicToolParser
from derender_svc.parsers.required import RequiredToolParser
from derender_svc.parsers.response_template import ResponseTemplateReasoningParser, ResponseTemplateToolParser
from derender_svc.parsers.think import (
    Apertus2509ReasoningParser,
    AppendThinkReasoningParser,
    AprielReasoningParser,
    DeepSeekR1ReasoningParser,
    DeepSeekV4ReasoningParser,
    DeepSeekV41ReasoningParser,
    Ernie45ReasoningParser,
    Gemma4ReasoningParser,
    GemmaReasoningParser,
    GraniteReasoningParser,
    HunyuanReasoningParser,
    KimiK2ReasoningParser,
    KimiK3ReasoningParser,
    KimiReasoningParser,
    MiniMaxM2ReasoningParser,
    MiniMaxM3ReasoningParser,
    MistralReasoningParser,
    NemotronV2ReasoningParser,
    Qwen3ReasoningParser,
    Qwen3ThinkingReasoningParser,
    SeedOssReasoningParser,
    SolarOpenReasoningParser,
    Step3p5ReasoningParser,
    ThinkReasoningParser,
)
from derender_svc.parsers.think_kin import (
    CohereCommand3ReasoningParser,
    CohereCommand4ReasoningParser,
    GraniteThinkingReasoningParser,
    K2HorizonReasoningParser,
    MiniCPMVReasoningParser,
    Plamo3ReasoningParser,
)
from derender_svc.parsers.token_calls import (
    DeepSeekV3ToolParser,
    DeepSeekV31ToolParser,
    KimiK2ToolParser,
    KimiK3ToolParser,
)
from derender_svc.parsers.vendor_calls import CohereCommandToolParser, MiniCPM5ToolParser, Plamo3ToolParser
from derender_svc.parsers.xml_calls import (
    DotsToolParser,
    Glm45ToolParser,
    IQuestQ1ToolParser,
    MiMoToolParser,
    MiniMaxM2ToolParser,
    Qwen3CoderToolParser,
    SeedOssToolParser,
    Spark3ToolParser,
    Step3ToolParser,
    TeleChat4ToolParser,
)
from scaleout_common.reasoning_ids import ReasoningIds, reasoning_ids

REASONING_PARSERS = {
    "think": ThinkReasoningParser,
    "qwen3": Qwen3ReasoningParser,
    "qwen3-thinking": Qwen3ThinkingReasoningParser,
    "mimo": Qwen3ThinkingReasoningParser,
    "ling3": Qwen3ThinkingReasoningParser,
    "deepseek_r1": DeepSeekR1ReasoningParser,
    "deepseek-r1": DeepSeekR1ReasoningParser,
    "deepseek_v3": ThinkReasoningParser,
    "deepseek-v3": Qwen3ReasoningParser,  # SGLang's spelling: its Qwen3Detector (vLLM's deepseek_v3 has no opener)
    "deepseek_v4": DeepSeekV4ReasoningParser,
    "deepseek-v4": DeepSeekV4ReasoningParser,
    "deepseek_v41": DeepSeekV41ReasoningParser,
    "deepseek-v41": DeepSeekV41ReasoningParser,
    "gigachat35": DeepSeekR1ReasoningParser,
    "iquest_q1": DeepSeekR1ReasoningParser,
    "glm45": Qwen3ReasoningParser,
    "glm47": Qwen3ReasoningParser,
    "poolside_v1": Qwen3ReasoningParser,
    "dots": Qwen3ReasoningParser,
    "nanbeige": Qwen3ReasoningParser,
    # SGLang: TeleChat4 and its XingChen4 / Xing4.0 renames; force_nonempty_content always on (nonempty.py)
    "telechat4": ThinkReasoningParser,
    "xingchen4": ThinkReasoningParser,
    "xing4_0": ThinkReasoningParser,
    "berrylm": Qwen3ReasoningParser,
    "kimi": KimiReasoningParser,
    "kimi_k2": KimiK2ReasoningParser,
    "kimi_k3": KimiK3ReasoningParser,
    "nemotron": ThinkReasoningParser,
    "nemotron_v3": Qwen3ReasoningParser,
    "nemotron_3": Qwen3ReasoningParser,
    "nano_v3": Qwen3ReasoningParser,
    "nemotron_v2": NemotronV2ReasoningParser,
    "ernie45": Ernie45ReasoningParser,
    "olmo3": ThinkReasoningParser,
    "granite": GraniteReasoningParser,
    "apriel": AprielReasoningParser,
    "apertus2509": Apertus2509ReasoningParser,
    "solar_open": SolarOpenReasoningParser,
    "hunyuan": HunyuanReasoningParser,
    "hunyuan_a13b": HunyuanReasoningParser,
    "minimax": Qwen3ThinkingReasoningParser,  # SGLang: its forced Qwen3Detector (append-think is the names below)
    "minimax_append_think": AppendThinkReasoningParser,
    "minimax_m2_append_think": AppendThinkReasoningParser,
    "minimax-append-think": AppendThinkReasoningParser,
    "minimax_m2": MiniMaxM2ReasoningParser,
    "minimax_m3": MiniMaxM3ReasoningParser,
    "minimax-m3": MiniMaxM3ReasoningParser,
    "step3": DeepSeekR1ReasoningParser,
    "step3p5": Step3p5ReasoningParser,
    "step5": Step3p5ReasoningParser,
    "interns1": Qwen3ReasoningParser,
    "seed_oss": SeedOssReasoningParser,
    "mistral": MistralReasoningParser,
    "gemma": GemmaReasoningParser,
    "gemma4": Gemma4ReasoningParser,
    "harmony": HarmonyReasoningParser,
    "openai_gptoss": HarmonyReasoningParser,
    "gpt_oss": HarmonyReasoningParser,
    "gpt-oss": HarmonyReasoningParser,
    # vLLM 0.33's additions (think_kin.py and the channel formats)
    "holo2": DeepSeekR1ReasoningParser,
    "hy_v3": HyV3ReasoningParser,
    "hy_v4": HyV4ReasoningParser,
    "granite_thinking_parser": GraniteThinkingReasoningParser,
    "k2_horizon": K2HorizonReasoningParser,
    "plamo3": Plamo3ReasoningParser,
    "cohere_command3": CohereCommand3ReasoningParser,
    "command_r7b": CohereCommand3ReasoningParser,
    "cohere_command4": CohereCommand4ReasoningParser,
    "minicpmv": MiniCPMVReasoningParser,
    "inkling": InklingReasoningParser,
    "muse": MuseReasoningParser,
    "musespark1x": MuseReasoningParser,
    "muse_glimmer": MuseGlimmerReasoningParser,
    # the model's response_template (its tokenizer config) declares the format
    "hf": ResponseTemplateReasoningParser,
    "beam": ResponseTemplateReasoningParser,
}
TOOL_PARSERS = {
    "hermes": HermesToolParser,
    "qwen": HermesToolParser,
    "qwen25": HermesToolParser,
    "qwen3_json": HermesToolParser,
    "granite4": HermesToolParser,
    "trinity": TrinityToolParser,
    "qwen2_5_coder": Qwen25CoderToolParser,
    "qwen25_coder": Qwen25CoderToolParser,
    "qwen3_coder": Qwen3CoderToolParser,
    "qwen3_xml": Qwen3CoderToolParser,
    "nanbeige": Qwen3CoderToolParser,
    "step3p5": Qwen3CoderToolParser,
    "step5": Qwen3CoderToolParser,
    "seed_oss": SeedOssToolParser,
    "mimo": MiMoToolParser,
    "llama3_json": Llama3JsonToolParser,
    "llama3": Llama3JsonToolParser,
    "llama4_json": Llama3JsonToolParser,
    "pythonic": PythonicToolParser,
    "llama4_pythonic": PythonicToolParser,
    "mistral": MistralToolParser,
    "deepseek_v3": DeepSeekV3ToolParser,
    "deepseekv3": DeepSeekV3ToolParser,
    "deepseek_v31": DeepSeekV31ToolParser,
    "deepseekv31": DeepSeekV31ToolParser,
    "deepseek_v32": DeepSeekV32ToolParser,
    "deepseekv32": DeepSeekV32ToolParser,
    "deepseek_v4": DeepSeekV4ToolParser,
    "deepseekv4": DeepSeekV4ToolParser,
    "deepseek_v41": DeepSeekV41ToolParser,
    "deepseekv41": DeepSeekV41ToolParser,
    "gigachat35": GigaChat35ToolParser,
    "step3": Step3ToolParser,
    "longcat": LongcatToolParser,
    "jamba": ToolCallsBlockParser,
    "apriel": ToolCallsBlockParser,
    "phi4_mini_json": Phi4MiniToolParser,
    "firefunction_v2": Phi4MiniToolParser,
    "generic": GenericToolParser,  # llama.cpp's JSON-object format for templates without tool syntax
    "functionary_v3_1": FunctionaryV31ToolParser,
    "functionary_v3_2": FunctionaryV32ToolParser,
    "nemotron_v2": NemotronV2ToolParser,
    "solar_open": SolarOpenToolParser,
    "mirothinker": MiroThinkerToolParser,
    "internlm": InternLmToolParser,
    "interns1": InternLmToolParser,
    "granite-20b-fc": Granite20bFcToolParser,
    "lfm2": Lfm2ToolParser,
    "olmo3": Olmo3ToolParser,
    "xlam": XlamToolParser,
    "apertus": ApertusToolParser,
    "apertus2509": ApertusToolParser,
    "gigachat3": GigaChat3ToolParser,
    "ernie45": HermesToolParser,
    "kimi_k2": KimiK2ToolParser,
    "kimi_k3": KimiK3ToolParser,
    "glm45": Glm45ToolParser,
    "glm47": Glm45ToolParser,
    "glm": Glm45ToolParser,
    "poolside_v1": Glm45ToolParser,
    "ling3": Glm45ToolParser,
    "spark25": Glm45ToolParser,
    "glm53": Glm53ToolParser,
    "iquest_q1": IQuestQ1ToolParser,
    "telechat4": TeleChat4ToolParser,
    "xingchen4": TeleChat4ToolParser,
    "xing4_0": TeleChat4ToolParser,
    "spark": Spark3ToolParser,
    "berrylm": Qwen3CoderToolParser,
    "granite": GraniteToolParser,
    "hunyuan": ToolCallsBlockParser,
    "hunyuan_a13b": ToolCallsBlockParser,
    "minimax": ToolCallsBlockParser,
    "minimax_m2": MiniMaxM2ToolParser,
    "minimax-m2": MiniMaxM2ToolParser,
    "dots": DotsToolParser,
    "minimax_m3": MiniMaxM3ToolParser,
    "minimax-m3": MiniMaxM3ToolParser,
    "gemma": GemmaToolParser,
    "functiongemma": GemmaToolParser,
    "gemma4": Gemma4ToolParser,
    "harmony": HarmonyToolParser,
    "openai": HarmonyToolParser,
    "gpt_oss": HarmonyToolParser,
    "gpt-oss": HarmonyToolParser,
    # vLLM 0.33's additions
    "hy_v3": HyV3ToolParser,
    "hy_v4": HyV4ToolParser,
    "k2_horizon": K2HorizonToolParser,
    "plamo3": Plamo3ToolParser,
    "cohere_command3": CohereCommandToolParser,
    "command_r7b": CohereCommandToolParser,
    "cohere_command4": CohereCommandToolParser,
    "minicpm5": MiniCPM5ToolParser,
    "inkling": InklingToolParser,
    "muse": MuseToolParser,
    "musespark1x": MuseToolParser,
    "muse_glimmer": MuseGlimmerToolParser,
    "hf": ResponseTemplateToolParser,
    "beam": ResponseTemplateToolParser,
}
# tool_choice naming a function picks `named`, tool_choice "required" picks `required` (over the model's own
# parser as its fallback); neither can be asked for by name.
ALL_TOOL_PARSERS = {**TOOL_PARSERS, "named": NamedToolParser, "required": RequiredToolParser}
NONE = "none"


def make_tool_parser(
    name: str, state: dict | None = None, function: str = "", tools=(), fallback: str | None = None, model=None
):
    """The tool parser `name`, rebuilt from `state` or new; `tools` (the request's) type schema-typed formats;
    `fallback` is the model's own parser under `required`; `model` (the TokenizerInfo) binds the parsers that
    the model's response_template declares."""
    initial = {"function": function} if name == "named" else {"fallback": fallback or ""} if name == "required" else {}
    parser = ALL_TOOL_PARSERS[name](**(state if state is not None else initial))
    parser.tools = tuple(tools)
    parser.model = model
    if model is not None and isinstance(parser, ResponseTemplateToolParser):
        parser.bind(model)
    return parser


def reasoning_spec(name: str, encode, blank=()) -> ReasoningIds:
    """The token-id form of reasoning parser `name` (see reasoning_ids.py) for a tokenizer's `encode`."""
    return reasoning_ids(REASONING_PARSERS[name], encode, blank)
