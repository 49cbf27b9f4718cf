"""Content parts: templates that loop over message content get parts, the others get the texts joined by "\\n"
(vLLM's content-format detection), and both match apply_chat_template given the same messages."""

from __future__ import annotations

from render_svc import convert
from render_svc.prompt import Options
from render_svc.renderer import Renderer
from tests.render.calls import chat

PARTS_TEMPLATE = (
    "{% for m in messages %}<{{ m.role }}>{% for part in m['content'] %}[{{ part.text }}]{% endfor %}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
ALIASED_TEMPLATE = "{% for m in messages %}{% set c = m.content %}{% for p in c %}{{ p.text }}|{% endfor %}{% endfor %}"
PARTS = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]


def test_templates_that_loop_over_content_get_parts(renderers, reference_tokenizer):
    renderer = renderers["default"]
    for source in (PARTS_TEMPLATE, ALIASED_TEMPLATE):
        assert renderer.templates.compiled(source).openai_content
    assert not renderer.templates.compiled(renderer.model.tokenizer.get_chat_template()).openai_content


def test_parts_render_like_apply_chat_template(renderers, reference_tokenizer):
    renderer = renderers["default"]
    template = renderer.templates.compiled(PARTS_TEMPLATE)
    request = chat([{"role": "user", "content": PARTS}, {"role": "assistant", "content": "plain"}])
    messages = convert.chat_messages(request.messages, template.openai_content)
    assert messages[1]["content"] == [{"type": "text", "text": "plain"}]  # a string becomes one text part
    text = renderer.templates.render(template, messages, variables=renderer.special_tokens)
    want = reference_tokenizer.apply_chat_template(
        [{"role": "user", "content": PARTS}, {"role": "assistant", "content": [{"type": "text", "text": "plain"}]}],
        chat_template=PARTS_TEMPLATE,
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text == want == "<user>[first][second]<assistant>[plain]<assistant>"


def test_string_templates_get_parts_joined(renderers, reference_tokenizer):
    response = renderers["default"].render_chat(chat([{"role": "user", "content": PARTS}]))
    want = reference_tokenizer.apply_chat_template(
        [{"role": "user", "content": "first\nsecond"}], add_generation_prompt=True, return_dict=False
    )
    assert list(response.generate_request.token_ids) == want


def test_content_format_can_be_forced(renderers):
    forced = Renderer(renderers["default"].model, options=Options(content_format="openai"))
    template = forced.templates.compiled(forced.model.tokenizer.get_chat_template())
    assert forced.openai_content(template) and not renderers["default"].openai_content(template)
