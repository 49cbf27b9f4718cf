"""Hugging Face's response templates (a checkpoint's `response_template` in its tokenizer config: `thinking`,
`content` and `tool_calls` regions between declared delimiters), as both sides of the `hf` / `beam` parsers read
them: derender parses outputs with them (derender_svc/parsers/response_template.py), render gates a grammar
after their reasoning (render_svc/structured.py). Loaded and checked as vLLM serves them; transformers parses."""

from __future__ import annotations

import copy
import re

from transformers.utils.chat_parsing.response_templates import ResponseTemplate, load_response_template

from scaleout_common.reasoning_ids import ReasoningTags

THINKING, CONTENT, TOOLS = "thinking", "content", "tool_calls"
NAMES = ("hf", "beam")  # the parser names read from the model's template


def serving_template(raw) -> ResponseTemplate:
    """The template a tokenizer config declares, checked and made streamable as vLLM serves it (ValueError)."""
    loaded = load_response_template(raw)
    unsupported = (set(loaded.fields) - {THINKING, CONTENT, TOOLS}) | (set(loaded.defaults) - {"role"})
    if unsupported:
        raise ValueError(f"fields {sorted(unsupported)} (supported: {THINKING}, {CONTENT}, {TOOLS})")
    for name in (THINKING, CONTENT):
        field = loaded.fields.get(name)
        if field is not None and (field.content != "text" or field.transform is not None or field.join is not None):
            raise ValueError(f"field {name!r} is not plain text, so it cannot be streamed")
    if TOOLS in loaded.fields and loaded.fields[TOOLS].open_re is None:
        raise ValueError(f"field {TOOLS!r} has no opener")
    spec = copy.deepcopy(raw)
    fields = spec["fields"]
    if CONTENT not in fields and all("open" in f or "open_pattern" in f for f in fields.values()):
        fields[CONTENT] = {}
    for field in fields.values():
        field["optional"] = True
    return load_response_template(spec)


def load_template(raw) -> tuple[ResponseTemplate | None, str]:
    """(the serving template, "") or (None, why there is none) for a tokenizer's `response_template`."""
    if raw is None:
        return None, "the tokenizer config declares no response_template"
    try:
        return serving_template(raw), ""
    except (TypeError, ValueError, KeyError, re.error) as error:
        return None, f"its response_template is not servable: {error}"


def reasoning_tags(template: ResponseTemplate) -> ReasoningTags:
    """The template's reasoning delimiters as tags (usage and CheckReasoning count over ids): the literal
    `thinking` openers and closers, the literal `content` / `tool_calls` openers end it; an implicit `thinking`
    is forced. Pattern delimiters have no literal and are left out."""
    thinking = template.fields.get(THINKING)
    if thinking is None:
        return ReasoningTags((), ())
    after = tuple(
        t for name in (CONTENT, TOOLS) if name in template.fields for t in template.fields[name].open_literals or ()
    )
    return ReasoningTags(
        tuple(thinking.open_literals or ()), tuple(thinking.close_literals or ()), after, thinking.open_re is None
    )


def declared(hf_tokenizer):
    """The tokenizer config's `response_template` (transformers keeps it as an attribute; vLLM also reads
    `init_kwargs`), or None."""
    template = getattr(hf_tokenizer, "response_template", None)
    if template is None:
        template = (getattr(hf_tokenizer, "init_kwargs", None) or {}).get("response_template")
    return template
