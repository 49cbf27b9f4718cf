"""vLLM's render protocol (render_svc/vllm_render) held against vLLM 0.33's own render server: every case of
`vllm_render_cases.py` through a real render server (RenderChatVllm / RenderCompletionVllm over gRPC) answers
what vLLM answered (`vllm_render_answers.json`, recorded by `python -m tests.render.record_vllm_render`), but
where the case says why not; and the field table covers every field of vLLM's two request models."""

from __future__ import annotations

import json

import grpc
import pytest
import pytest_asyncio
from google.api import httpbody_pb2

from render_svc.vllm_render.fields import BOTH, CHAT, COMPLETION, FIELDS, OURS
from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason
from tests.render.conftest import render_channel
from tests.render.vllm_compare import differences, recorded
from tests.render.vllm_render_cases import CASES
from tests.render.vllm_render_cases import CHAT as CHAT_PATH

RECORDED = recorded()
METHODS = {CHAT_PATH: "RenderChatVllm"}
TYPED = {CHAT: render_pb2.RenderChatRequest, COMPLETION: render_pb2.RenderCompletionRequest}


@pytest_asyncio.fixture(scope="module")
async def call():
    """A render server as `vllm launch render` was recorded against: the default model under its folder name."""
    async with render_channel() as channel:

        async def send(case):
            method = METHODS.get(case.path, "RenderCompletionVllm")
            rpc = channel.unary_unary(
                f"/scaleout.v1.RenderService/{method}",
                request_serializer=httpbody_pb2.HttpBody.SerializeToString,
                response_deserializer=httpbody_pb2.HttpBody.FromString,
            )
            body = httpbody_pb2.HttpBody(content_type="application/json", data=json.dumps(case.body).encode())
            try:
                answer = await rpc(body)
            except grpc.aio.AioRpcError as error:
                failure = ServiceError.from_rpc_error(error)
                return Reason(failure.reason).http, failure
            assert answer.content_type == "application/json"
            return 200, json.loads(answer.data)

        yield send


def test_the_corpus_covers_vllms_shapes():
    assert len(CASES) >= 150 and len({c.name for c in CASES}) == len(CASES)
    assert set(RECORDED["answers"]) == {c.name for c in CASES}, "re-record: python -m tests.render.record_vllm_render"
    prompts = [c.body.get("prompt") for c in CASES if c.path != CHAT_PATH]
    assert any(isinstance(p, str) for p in prompts) and any(
        isinstance(p, list) and p and isinstance(p[0], str) for p in prompts
    )
    assert any(isinstance(p, list) and p and isinstance(p[0], int) for p in prompts)
    assert any(isinstance(p, list) and p and isinstance(p[0], list) for p in prompts)
    served = sum(1 for a in RECORDED["answers"].values() if a["status"] == 200)
    refused_on_purpose = [c for c in CASES if c.differs and not c.paths]
    assert served - len(refused_on_purpose) >= 120  # the shapes vLLM serves are ours too, but a few on purpose


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_answers_as_vllm_does(call, case):
    status, ours = await call(case)
    vllm = RECORDED["answers"][case.name]
    if case.differs and not case.paths:
        assert vllm["status"] == 200 and status == 400, (status, ours)
        return
    found = differences(case, vllm, status, ours if status == 200 else None)
    assert not found, f"{found} ({ours.message if status != 200 else ''})"
    if status == 200:
        for item in ours if isinstance(ours, list) else [ours]:
            ids = item["token_ids"]
            assert item["scaleout"]["derender_context"]["num_prompt_tokens"] == len(ids)
            assert "token_ids" not in item["scaleout"]["generate_request"]  # they are the top-level ones


@pytest.mark.parametrize("route", [CHAT, COMPLETION])
def test_the_table_covers_every_field_of_vllms_request(route):
    theirs = set(RECORDED["fields"][route])
    ours = {name for name, field in FIELDS.items() if field.route in (BOTH, route)}
    assert theirs <= ours | {"thinking_token_budget"}, theirs - ours  # completions: refused (see the table)
    # completions' return_prompt_text is our addition (chat: vLLM's); SGLang's fields come from vllm-router
    sglang = {"separate_reasoning", "stream_reasoning", "no_stop_trim", "return_hidden_states"}
    assert ours - theirs <= {"return_prompt_text"} | sglang, ours - theirs


@pytest.mark.parametrize("route", [CHAT, COMPLETION])
def test_fields_taken_as_ours_are_our_fields(route):
    typed = set(TYPED[route].DESCRIPTOR.fields_by_name)
    taken = {name for name, field in FIELDS.items() if field.how == OURS and field.route in (BOTH, route)}
    assert taken <= typed, taken - typed
