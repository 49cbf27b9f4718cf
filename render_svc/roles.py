"""Roles beyond OpenAI's, and roles a template does not know, as vLLM treats them before and after the template.

A custom role (`{"role": "my-custom-role", ...}`: a name of up to 64 letters, digits and `_.:-`) is handed to
the template as vLLM hands it; a template that drops roles it does not know would drop that message silently, so
a custom-role message whose text the rendered prompt does not hold is refused (INVALID_ROLE naming its role).

OpenAI's `developer` role (its newer name for `system`): a template that never mentions "developer" gets each
developer message as a system message, and then (only then) every system message merged into one leading
system message, their texts joined by a blank line, as vLLM's `safe_apply_chat_template` does
(`_convert_developer_to_system`, `_consolidate_system_messages`): many templates accept a system message only
first. A template that mentions the role renders it as written.
"""

from __future__ import annotations

import re

from scaleout_common.errors import quote
from scaleout_common.reasons import Reason, fail

DEVELOPER, SYSTEM = "developer", "system"
OPENAI_ROLES = frozenset({SYSTEM, DEVELOPER, "user", "assistant", "tool"})
CUSTOM_ROLE = re.compile(r"[A-Za-z][\w.:-]{0,63}")


def check_rendered(roles: list[str], messages: list[dict], text: str) -> None:
    """Every custom-role message's text is in the rendered prompt `text` (`roles`: the request's, in its order;
    `messages`: the template's, in which custom-role ones keep that order)."""
    custom = [i for i, role in enumerate(roles) if role not in OPENAI_ROLES]
    rendered = (m for m in messages if m["role"] not in OPENAI_ROLES)
    for i, message in zip(custom, rendered):
        if any(line.strip() not in text for line in _text(message["content"]).split("\n")):  # "" is in any text
            raise fail(
                Reason.INVALID_ROLE,
                f"the chat template does not render a message of role {quote(roles[i])}",
                f"messages[{i}].role",
            )


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
