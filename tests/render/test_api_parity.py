"""Anthropic Messages and OpenAI Responses render as their chat form: render_svc.anthropic_chat and .responses_chat
convert each request to exactly the chat request vLLM converts it to (written out in the cases), and the rendered
token ids, sampling and derender context equal those of that chat request, for three template families. Fields that cannot be
honoured (images, stored state, hosted tools, ...) are refused with 400 naming them; the same holds through a
real render server (RenderMessages / RenderResponses over gRPC)."""

from __future__ import annotations

import copy
import json

import pytest
from google.api import httpbody_pb2
from google.protobuf import json_format

from render_svc import anthropic_chat, api_rpcs, responses_chat
from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from tests.render import messages_cases, responses_cases
from tests.render.calls import expect
from tests.render.fixtures import FAMILIES

APIS = {
    "messages": (messages_cases, anthropic_chat.messages_chat, api_rpcs.render_messages, "msg_"),
    "responses": (responses_cases, responses_chat.responses_chat, api_rpcs.render_responses, "resp_"),
}
CASES = [(api, case) for api, (module, *_) in APIS.items() for case in module.CASES]
REFUSED = [(api, *refused) for api, (module, *_) in APIS.items() for refused in module.REFUSED]


def _body(request: dict) -> httpbody_pb2.HttpBody:
    return httpbody_pb2.HttpBody(content_type="application/json", data=json.dumps(request).encode())


def _chat_request(chat: dict) -> render_pb2.RenderChatRequest:
    """The equivalent chat request as a REST client would send it to /v1/chat/completions/render."""
    return json_format.ParseDict(chat, render_pb2.RenderChatRequest())


def _context(response: render_pb2.RenderChatResponse) -> dict:
    ctx = json_format.MessageToDict(response.derender_context, preserving_proto_field_name=True)
    return {k: v for k, v in ctx.items() if k not in ("id", "created")}


@pytest.mark.parametrize("api", APIS)
def test_enough_cases(api):
    module = APIS[api][0]
    assert len(module.CASES) >= 30
    assert len({case.name for case in module.CASES}) == len(module.CASES)


@pytest.mark.parametrize(("api", "case"), CASES, ids=lambda v: v if isinstance(v, str) else v.name)
def test_conversion_is_vllms_chat_form(api, case):
    convert = APIS[api][1]
    assert convert(copy.deepcopy(case.request)) == case.chat


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("api", "case"), CASES, ids=lambda v: v if isinstance(v, str) else v.name)
def test_tokens_equal_the_chat_requests(renderers, family, api, case):
    renderer = renderers[family]
    _, _, render, prefix = APIS[api]
    got = render(renderer, _body(case.request))
    want = renderer.render_chat(_chat_request(case.chat))
    assert list(got.generate_request.token_ids) == list(want.generate_request.token_ids)
    assert got.generate_request.sampling_params == want.generate_request.sampling_params
    assert _context(got) == _context(want)
    assert got.derender_context.id.startswith(prefix)
    assert got.generate_request.request_id == got.derender_context.id


def test_inline_system_renders_as_the_pre_merged_request(renderers):
    inline = messages_cases.req(
        [{"role": "system", "content": "Answer in French."}, messages_cases.u("Hello")], system="Be brief. "
    )
    merged = messages_cases.req(
        [messages_cases.u("Hello")], system=[messages_cases.text("Be brief. Answer in French.")]
    )
    for renderer in renderers.values():
        ids = [list(api_rpcs.render_messages(renderer, _body(r)).generate_request.token_ids) for r in (inline, merged)]
        assert ids[0] == ids[1]


@pytest.mark.parametrize(
    ("api", "name", "request_", "reason", "field"), REFUSED, ids=lambda v: v if isinstance(v, str) else ""
)
def test_refused_with_400_naming_the_field(renderers, api, name, request_, reason, field):
    render = APIS[api][2]
    with pytest.raises(ServiceError) as caught:
        render(renderers["default"], _body(request_))
    error = caught.value
    assert error.reason == reason, error.message
    assert error.code.name in ("INVALID_ARGUMENT", "OUT_OF_RANGE", "NOT_FOUND")
    if field is not None:
        assert error.violations[0][0] == field, error.violations


def test_bad_json_is_invalid_json(renderers):
    renderer = next(iter(renderers.values()))
    for render in (api_rpcs.render_messages, api_rpcs.render_responses):
        for data in (b"{", b"[1]", b'{"x": NaN}'):
            with pytest.raises(ServiceError) as caught:
                render(renderer, httpbody_pb2.HttpBody(data=data))
            assert caught.value.reason == "INVALID_JSON"  # the reason the gateway gives a body it cannot parse


async def test_render_rpcs_over_grpc(stub):
    case = messages_cases.CASES[0]
    rendered = await stub.RenderMessages(_body({**case.request, "model": "smol"}))
    chat = await stub.RenderChat(_chat_request({**case.chat, "model": "smol"}))
    assert rendered.generate_request.token_ids == chat.generate_request.token_ids
    assert rendered.derender_context.id.startswith("msg_")
    case = responses_cases.CASES[0]
    rendered = await stub.RenderResponses(_body({**case.request, "model": "smol"}))
    chat = await stub.RenderChat(_chat_request({**case.chat, "model": "smol"}))
    assert rendered.generate_request.token_ids == chat.generate_request.token_ids
    error = await expect(
        stub.RenderResponses(_body({"input": "hi", "store": True})), "INVALID_ARGUMENT", "UNSUPPORTED_FIELD"
    )
    assert error.violations[0][0] == "store"
    error = await expect(
        stub.RenderMessages(_body(messages_cases.REFUSED[0][1] | {"model": "smol"})),
        "INVALID_ARGUMENT",
        "INVALID_CONTENT",
    )
    assert error.violations[0][0] == "messages[0].content[0]"
