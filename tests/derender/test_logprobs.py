"""Logprob token text around characters split over tokens."""

from __future__ import annotations

from types import SimpleNamespace

from derender_svc.logprobs import LogprobRenderer


def test_alternative_that_cannot_continue_a_split_character_shows_its_own_text():
    e_acute = "é".encode()
    table = [e_acute[:1], e_acute[1:], b"!"]
    top = [SimpleNamespace(token_ids=[0], logprobs=[-0.1]), SimpleNamespace(token_ids=[1, 2], logprobs=[-0.1, -2.0])]
    out = LogprobRenderer(table, 2).render([0, 1], SimpleNamespace(logprobs=[-0.1, -0.1], top=top))
    assert [lp.token for lp in out] == ["bytes:\\xc3", "é"]
    assert [(alt.token, alt.bytes) for alt in out[1].top] == [("é", e_acute[1:]), ("!", b"!")]


def test_sampled_token_that_breaks_a_character_shows_its_own_text():
    table = ["é".encode()[:1], b"!"]
    out = LogprobRenderer(table, 0).render([0, 1], SimpleNamespace(logprobs=[-0.1, -0.1], top=[]))
    assert out[1].token == "!"


def test_an_infinite_logprob_is_printed_as_vllm_prints_it():
    """A token cut by top-k (processed logprobs) has -inf, which JSON cannot hold: -9999.0, as vLLM."""
    top = [SimpleNamespace(token_ids=[0, 1], logprobs=[-0.5, float("-inf")])]
    [out] = LogprobRenderer([b"a", b"b"], 2).render([1], SimpleNamespace(logprobs=[float("-inf")], top=top))
    assert out.logprob == -9999.0 and [alt.logprob for alt in out.top] == [-0.5, -9999.0]
