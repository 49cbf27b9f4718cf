"""An engine error names the client's own field: the first constraint source the client's body holds."""

from __future__ import annotations

import json

import pytest

from pipeline_svc.client_fields import ANTHROPIC, OPENAI_CHAT, RESPONSES, in_client_terms
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
