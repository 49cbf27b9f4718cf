"""No client value travels unbounded into an error: quoted values are cut to 100 characters plus their length, and
every text a ServiceError carries (built here or passed on from a downstream) to MAX_TEXT_CHARS."""

from __future__ import annotations

import json

from pipeline_svc.openai_request import chat_request
from scaleout_common.errors import MAX_TEXT_CHARS, ServiceError, quote
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail


def test_a_long_value_is_quoted_by_its_head_and_length():
    assert quote("user") == "'user'"
    assert quote("a" * 70_000) == repr("a" * 100) + "… (70000 characters)"
    assert quote(b"b" * 200).endswith("… (200 bytes)")
    assert len(quote(list(range(10_000)))) < 150


def test_every_text_of_an_error_is_bounded_on_the_wire():
    value = "r" * 30_000
    error = fail(Reason.INVALID_ROLE, f"unknown role {value}", f"messages[0].{value}", echo=value)
    status = error.to_status()
    assert len(status.SerializeToString()) < 6 * MAX_TEXT_CHARS
    assert status.message.endswith(f"… ({len(value) + 13} characters)")
    passed_on = ServiceError.from_status(status)
    assert passed_on.message == error.message and passed_on.violations == error.violations


def test_a_downstream_status_with_a_huge_message_is_cut_when_passed_on():
    error = ServiceError.from_status(fail(Reason.INVALID_REQUEST, "x").to_status())
    error = ServiceError(error.code, error.reason, "y" * 100_000)
    assert len(error.message) <= MAX_TEXT_CHARS + 30


def test_json_refusals_speak_our_words_and_never_quote_the_body():
    for body, words in (
        (b"[" * 50_000 + b"]" * 50_000, "nests arrays and objects too deeply"),
        (b'{"a": 1' + b"0" * 5000 + b"e999}", "… (5005 characters) is out of range"),
        (b'{"' + b"k" * 70_000 + b'" 1}', "Expecting ':' delimiter at line 1 column 70005"),
    ):
        try:
            load_object(body)
        except ServiceError as error:
            assert error.reason == Reason.INVALID_JSON and words in error.message, error.message
            assert len(error.message) < 300
        else:
            raise AssertionError(body[:20])


def test_an_unknown_key_is_named_by_its_head():
    key = "k" * 70_000
    try:
        chat_request(json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], key: 1}).encode())
    except ServiceError as error:
        assert error.reason == Reason.UNSUPPORTED_FIELD and len(error.message) < 200
        assert len(error.violations[0][0]) <= 100 and error.message.endswith("is not a field this API takes")
    else:
        raise AssertionError("accepted")
