"""Roles a template does not know, renamed as vLLM renames them before it applies the template.

OpenAI's `developer` role (its newer name for `system`): a template that never mentions "developer" gets each
developer message as a system message, and then (only then) every system message merged into one leading
system message, their texts joined by a blank line, as vLLM's `safe_apply_chat_template` does
(`_convert_developer_to_system`, `_consolidate_system_messages`): many templates accept a system message only
first. A template that mentions the role renders it as written.
"""

from __future__ import annotations

DEVELOPER, SYSTEM = "developer", "system"


def supports_developer(template_source: str) -> bool:
    return '"developer"' in template_source or "'developer'" in template_source


def developer_as_system(messages: list[dict], template_source: str) -> list[dict]:
    if not any(m["role"] == DEVELOPER for m in messages) or supports_developer(template_source):
        return messages
    renamed = [{**m, "role": SYSTEM} if m["role"] == DEVELOPER else m for m in messages]
    systems = [i for i, m in enumerate(renamed) if m["role"] == SYSTEM]
    if systems == [0]:
        return renamed
    texts = [text for text in (_text(renamed[i]["content"]) for i in systems) if text]
    return [{"role": SYSTEM, "content": "\n\n".join(texts)}, *(m for m in renamed if m["role"] != SYSTEM)]


def _text(content) -> str:
    """A message's text: its string, or its text parts joined by newlines."""
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content)
