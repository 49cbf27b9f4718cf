"""Parser registry: reasoning parsers and tool-call parsers by name ("none" turns one off)."""

from __future__ import annotations

from derender_svc.parsers.hermes import HermesToolParser
from derender_svc.parsers.llama3_json import Llama3JsonToolParser
from derender_svc.parsers.mistral import MistralToolParser
from derender_svc.parsers.named import NamedToolParser
from derender_svc.parsers.pythonic import PythonicToolParser
from derender_svc.parsers.think import ThinkReasoningParser

REASONING_PARSERS = {"think": ThinkReasoningParser, "deepseek_r1": ThinkReasoningParser, "qwen3": ThinkReasoningParser}
TOOL_PARSERS = {
    "hermes": HermesToolParser,
    "qwen": HermesToolParser,
    "llama3_json": Llama3JsonToolParser,
    "pythonic": PythonicToolParser,
    "mistral": MistralToolParser,
}
# tool_choice naming a function picks this one; it cannot be asked for by name.
ALL_TOOL_PARSERS = {**TOOL_PARSERS, "named": NamedToolParser}
NONE = "none"
