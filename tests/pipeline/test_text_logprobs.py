"""Responses' output_text logprobs: the tokens that wrote the text, among those of reasoning, tags, calls and
the stop token."""

from __future__ import annotations

from pipeline_svc.responses_response import text_logprobs
from scaleout.v1 import derender_pb2


def logprobs(*tokens: str) -> derender_pb2.ChatLogprobs:
    return derender_pb2.ChatLogprobs(
        content=[derender_pb2.ChatLogprob(token=t, logprob=-0.5, bytes=list(t.encode())) for t in tokens]
    )


def spelled(entries: list[dict]) -> str:
    return "".join(e["token"] for e in entries)


def test_the_stop_token_is_not_the_texts():
    assert spelled(text_logprobs(logprobs("Hi", " there", "<|im_end|>"), "Hi there", alone=True)) == "Hi there"


def test_reasoning_and_its_tags_are_left_out():
    tokens = logprobs("<think>", "\\n", "hmm", "</think>", "\\n\\n", "Yes", ".")
    tokens.content[1].token, tokens.content[4].token = "\n", "\n\n"
    assert spelled(text_logprobs(tokens, "Yes.", alone=False)) == "Yes."


def test_a_whitespace_delta_keeps_its_token():
    assert spelled(text_logprobs(logprobs("\n"), "\n", alone=True)) == "\n"


def test_tokens_that_do_not_spell_the_text():
    byte_tokens = logprobs("bytes:\\xe2\\x82", "bytes:\\xac")
    assert len(text_logprobs(byte_tokens, "€", alone=True)) == 2  # nothing else was written: all are its
    assert text_logprobs(byte_tokens, "€", alone=False) == []  # they cannot be placed among others
