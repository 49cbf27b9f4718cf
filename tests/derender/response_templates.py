"""Public response_templates (Hugging Face's chat-response-parsing format) for the `hf` / `beam` parsers' tests:
Gemma 4's, as its instruction checkpoints ship it (vLLM's tests/parser/test_response_template.py), and Qwen3's and
Qwen3.5's from transformers' serving fallbacks (transformers/cli/serving/utils.py), their reasoning field named
`thinking` as vLLM serves it."""

from __future__ import annotations

from types import SimpleNamespace

from scaleout_common.response_templates import load_template

GEMMA4 = {
    "defaults": {"role": "assistant"},
    "fields": {
        "content": {"close": ["<turn|>", "<|tool_response>", "<eos>"], "content": "text"},
        "thinking": {"close": "<channel|>", "content": "text", "open": "<|channel>thought\n"},
        "tool_calls": {
            "close": "<tool_call|>",
            "content": "json",
            "content_args": {"string_delims": [['<|"|>', '<|"|>']], "unquoted_keys": True},
            "open_pattern": r"<\|tool_call>call:(?P<name>\w+)",
            "repeats": True,
            "transform": {"function": {"arguments": "{content}", "name": "{name}"}, "type": "function"},
        },
    },
    "start_anchor": ["<|turn>model\n", "<tool_response|>"],
}
QWEN3 = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>)", "content": "text"},
    },
}
QWEN35 = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>\s*<function=(?P<name>[^>\n]+)>",
            "close_pattern": r"</function>\s*</tool_call>",
            "repeats": True,
            "content": "xml-inline",
            "content_args": {"tag_pattern": r"<parameter=(?P<key>[^>\n]+)>\s*(?P<value>.*?)\s*</parameter>"},
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {"close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)", "content": "text"},
    },
}
TEMPLATES = {"gemma4": GEMMA4, "qwen3": QWEN3, "qwen35": QWEN35}


def template_info(raw=GEMMA4) -> SimpleNamespace:
    """The model data a template parser binds (a TokenizerInfo's response_template fields)."""
    template, problem = load_template(raw)
    return SimpleNamespace(response_template=template, template_problem=problem, special_tokens={})
