"""Rendered ids equal tokenizer.apply_chat_template(..., tokenize=True) with the same arguments, for three
template families (the model's ChatML, a Llama-3-style and a Qwen3/Hermes-style template), in the core and
through real servers started with --chat-template (one RenderChatBatch per family: batch encode included)."""

from __future__ import annotations

import pytest

from scaleout.v1 import render_pb2
from tests.render.conftest import render_server
from tests.render.fixtures import FAMILIES, cases

CASES = cases()


def _template(renderers, family):
    return renderers[family].model.tokenizer.get_chat_template()


def test_enough_fixtures():
    assert len(CASES) >= 50


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_render_chat_matches_apply_chat_template(renderers, reference_tokenizer, family, case):
    renderer = renderers[family]
    want = case.reference(reference_tokenizer, _template(renderers, family))
    got = renderer.render_chat(case.request(return_prompt_text=True))
    assert list(got.generate_request.token_ids) == want
    assert got.prompt_text == case.reference(reference_tokenizer, _template(renderers, family), tokenize=False)


@pytest.mark.parametrize("family", FAMILIES)
async def test_batch_over_grpc_matches_apply_chat_template(renderers, reference_tokenizer, family):
    path = FAMILIES[family]
    argv = ["--chat-template", str(path)] if path else []
    async with render_server(*argv) as stub:
        batch = await stub.RenderChatBatch(render_pb2.RenderChatBatchRequest(requests=[c.request() for c in CASES]))
        single = await stub.RenderChat(CASES[0].request())
    template = _template(renderers, family)
    assert len(batch.responses) == len(CASES)
    for case, response in zip(CASES, batch.responses):
        assert list(response.generate_request.token_ids) == case.reference(reference_tokenizer, template), case.name
    assert single.generate_request.token_ids == batch.responses[0].generate_request.token_ids
    assert single.generate_request.tokenizer_fingerprint == renderers[family].model.fingerprint


def test_families_differ(renderers):
    request = CASES[0].request()
    ids = {family: tuple(r.render_chat(request).generate_request.token_ids) for family, r in renderers.items()}
    assert len(set(ids.values())) == 3
    assert len({r.model.fingerprint for r in renderers.values()}) == 3
