"""Model folders and the tokenizer fingerprint every service stamps or checks."""

from __future__ import annotations

import pytest

from scaleout_common.config import server_parser
from scaleout_common.models import load_tokenizer, resolve_model, tokenizer_fingerprint

TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"


@pytest.fixture(scope="module")
def folder():
    return resolve_model(None)


def test_default_model_is_a_plain_hf_folder(folder):
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    assert load_tokenizer(folder).eos_token == "<|im_end|>"


def test_a_chat_template_override_changes_the_fingerprint_the_same_way_everywhere(folder, tmp_path):
    template_file = tmp_path / "template.jinja"
    template_file.write_text(TEMPLATE)
    plain = tokenizer_fingerprint(load_tokenizer(folder))
    assert tokenizer_fingerprint(load_tokenizer(folder)) == plain  # stable across loads
    from_file = tokenizer_fingerprint(load_tokenizer(folder, chat_template=str(template_file)))
    inline = tokenizer_fingerprint(load_tokenizer(folder, chat_template=TEMPLATE))
    assert from_file == inline != plain


def test_every_service_takes_the_same_chat_template_flag(monkeypatch):
    monkeypatch.setenv("SCALEOUT_CHAT_TEMPLATE", "/templates/llama3.jinja")
    for service in ("render", "engine", "derender"):
        assert server_parser(service, 0, "").parse_args([]).chat_template == "/templates/llama3.jinja"


def test_a_missing_template_file_is_a_clear_error(folder):
    with pytest.raises(FileNotFoundError):
        load_tokenizer(folder, chat_template="/no/such/template.jinja")
