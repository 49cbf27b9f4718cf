"""An engine error names the client's own field: the first constraint source the client's body holds, and a
token-id prompt's `prompt` path."""

from __future__ import annotations

import json

import pytest

from pipeline_svc.client_fields import ANTHROPIC, OPENAI_CHAT, OPENAI_COMPLETION, RESPONSES, in_client_terms
from scaleout_common import sampling_rules
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

SCHEMA = {"type": "object"}


def grammar_error():
    return fail(
        Reason.INVALID_GRAMMAR, "the grammar failed to compile", "sampling_params.structured_outputs.json_schema"
    )


@pytest.mark.parametrize(
    ("body", "sources", "field"),
    [
        ({"response_format": {"type": "json_schema"}, "tools": []}, OPENAI_CHAT, "response_format"),
        ({"tools": [{}], "tool_choice": "required"}, OPENAI_CHAT, "tool_choice"),
        ({"output_config": {"format": {"schema": SCHEMA}}}, ANTHROPIC, "output_config.format"),
        ({"output_config": {"effort": "low"}, "tool_choice": {"type": "any"}}, ANTHROPIC, "tool_choice"),
        ({"text": {"format": {"type": "json_schema"}}}, RESPONSES, "text.format"),
    ],
)
def test_the_constraint_is_named_as_the_client_sent_it(body, sources, field):
    error = in_client_terms(grammar_error(), json.dumps(body).encode(), sources)
    assert error.violations[0][0] == field


def test_other_fields_and_unknown_sources_stay_as_they_are():
    other = fail(Reason.INVALID_SAMPLING_PARAM, "bad", "temperature")
    assert in_client_terms(other, b"{}", OPENAI_CHAT).violations[0][0] == "temperature"
    unknown = in_client_terms(grammar_error(), b'{"messages": []}', OPENAI_CHAT)
    assert unknown.violations[0][0] == "sampling_params.structured_outputs.json_schema"


@pytest.mark.parametrize(("prompt", "i", "named"), [([1, 99], 0, "prompt[1]"), ([[1], [2, 99]], 1, "prompt[1][1]")])
def test_an_out_of_vocabulary_prompt_id_names_the_clients_prompt(prompt, i, named):
    with pytest.raises(ServiceError) as caught:
        sampling_rules.check_token_ids(prompt[i] if i else prompt, 50, f"prompt_token_ids[{i}].token_ids")
    error = in_client_terms(caught.value, json.dumps({"prompt": prompt}).encode(), OPENAI_COMPLETION)
    assert error.violations[0][0] == named and "prompt_token_ids" not in error.message + error.violations[0][1]
    assert "out of vocabulary" in error.message  # vLLM's words for it


def test_a_forwarded_chat_prompts_bad_id_names_the_clients_kv_transfer_params():
    with pytest.raises(ServiceError) as caught:
        sampling_rules.check_token_ids([1, 99], 50, "prompt_token_ids")
    body = {"messages": [], "kv_transfer_params": {"prompt_token_ids": [1, 99]}}
    error = in_client_terms(caught.value, json.dumps(body).encode(), OPENAI_CHAT)
    assert error.violations[0][0] == "kv_transfer_params.prompt_token_ids[1]"
    assert error.message.startswith("kv_transfer_params.prompt_token_ids has id 99")
