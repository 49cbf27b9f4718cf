"""A `developer` message renders as vLLM renders it (render_svc/roles.py): as the system turn where the template
has no developer role, merged with the other system messages into one leading one; as written where it has."""

from __future__ import annotations

from render_svc.roles import developer_as_system

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
