"""A `developer` message renders as vLLM renders it (render_svc/roles.py): as the system turn where the template
has no developer role, merged with the other system messages into one leading one; as written where it has. A custom
role reaches the template as written; a template that drops it is refused rather than the message lost."""

from __future__ import annotations

import pytest

from render_svc.roles import check_rendered, developer_as_system
from scaleout_common.errors import ServiceError
from tests.render.calls import chat, expect

PLAIN = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
KNOWS = "{% if m.role == 'developer' %}dev{% endif %}"


def test_a_leading_developer_message_becomes_the_system_message():
    messages = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert developer_as_system(messages, PLAIN) == [{"role": "system", "content": "Be brief."}, messages[1]]


def test_system_messages_merge_into_one_leading_one():
    messages = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Hi"},
        {"role": "developer", "content": [{"type": "text", "text": "Be"}, {"type": "text", "text": "brief."}]},
        {"role": "system", "content": ""},
        {"role": "user", "content": "Why?"},
    ]
    assert developer_as_system(messages, PLAIN) == [
        {"role": "system", "content": "Be kind.\n\nBe\nbrief."},
        {"role": "user", "content": "Hi"},
        {"role": "user", "content": "Why?"},
    ]


def test_a_template_with_a_developer_role_renders_it_as_written():
    messages = [{"role": "user", "content": "Hi"}, {"role": "developer", "content": "Be brief."}]
    assert developer_as_system(messages, KNOWS) is messages
    assert developer_as_system([{"role": "user", "content": "Hi"}], PLAIN) == [{"role": "user", "content": "Hi"}]


# Qwen2.5's shape: the roles it knows, each its own branch; any other role renders nothing
DROPS = (
    "{% for m in messages %}{% if m.role in ['user', 'system'] %}<{{ m.role }}>{{ m.content }}{% endif %}{% endfor %}"
)


def test_a_custom_role_message_the_text_lacks_is_named():
    messages = [{"role": "user", "content": "Hi"}, {"role": "critic", "content": [{"type": "text", "text": "Bad."}]}]
    check_rendered(["user", "critic"], messages, "<user>Hi\ncritic: Bad.")
    with pytest.raises(ServiceError) as caught:
        check_rendered(["user", "critic"], messages, "<user>Hi")
    assert caught.value.violations[0][0] == "messages[1].role"


async def test_a_template_that_drops_a_custom_role_is_refused(trusting_stub):
    messages = [{"role": "user", "content": "Hi"}, {"role": "my-custom-role", "content": "what is 1+1?"}]
    rendered = await trusting_stub.RenderChat(chat(messages, chat_template=PLAIN, return_prompt_text=True))
    assert "my-custom-role: what is 1+1?" in rendered.prompt_text
    error = await expect(
        trusting_stub.RenderChat(chat(messages, chat_template=DROPS)), "INVALID_ARGUMENT", "INVALID_ROLE"
    )
    assert error.violations[0][0] == "messages[1].role" and "my-custom-role" in error.message
