"""vLLM's render protocol (render_svc/vllm_render) held against vLLM 0.33's own render server: every case of
`vllm_render_cases.py` through a real render server (RenderChatVllm / RenderCompletionVllm over gRPC) answers
what vLLM answered (`vllm_render_answers.json`, recorded by `python -m tests.render.record_vllm_render`), but
where the case says why not; the same server's HTTP face (--http-port, render_svc/http_face.py) answers every
case exactly as the RPC does, errors in the gateway's OpenAI shape; and the field table covers every field of
vLLM's two request models."""

from __future__ import annotations

import json
import re

import grpc
import httpx
import pytest
import pytest_asyncio
from google.api import httpbody_pb2
from google.protobuf import json_format

from render_svc import flags
from render_svc.service import RenderService
from render_svc.vllm_render.fields import BOTH, CHAT, COMPLETION, FIELDS, OURS
from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.openai_errors import VLLM_TYPES
from scaleout_common.reasons import Reason
from tests.gateway.rest import detail_reason
from tests.render.vllm_compare import differences, recorded
from tests.render.vllm_render_cases import CASES, MESSAGES, RESPONSES
from tests.render.vllm_render_cases import CHAT as CHAT_PATH
from tests.render.vllm_render_cases import COMPLETION as COMPLETION_PATH
from tests.serving import serving

RECORDED = recorded()
METHODS = {CHAT_PATH: "RenderChatVllm", MESSAGES: "RenderMessagesVllm", RESPONSES: "RenderResponsesVllm"}
TYPED = {CHAT: render_pb2.RenderChatRequest, COMPLETION: render_pb2.RenderCompletionRequest}


@pytest_asyncio.fixture(scope="module")
async def faces():
    """A render server as `vllm launch render` was recorded against (the default model under its folder name),
    with its HTTP face on: (gRPC channel, HTTP client)."""
    argv = ["--http-port", "0"]
    service = RenderService(flags.parser().parse_args(argv))
    async with serving(service, flags.parser(), *argv) as target, grpc.aio.insecure_channel(target) as channel:
        assert service.http is not None
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{service.http.port}", timeout=60) as http:
            yield channel, http


@pytest.fixture
def call(faces):
    channel = faces[0]

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

    return send


def test_the_corpus_covers_vllms_shapes():
    assert len(CASES) >= 150 and len({c.name for c in CASES}) == len(CASES)
    own = {c.name for c in CASES if c.path in (CHAT_PATH, COMPLETION_PATH)}
    assert own <= set(RECORDED["answers"]) <= {c.name for c in CASES}, "re-record: tests.render.record_vllm_render"
    assert sum(c.name in RECORDED["answers"] for c in CASES if c.path in (MESSAGES, RESPONSES)) >= 85
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
    if case.name not in RECORDED["answers"]:  # a request added to messages_cases.py / responses_cases.py since
        pytest.skip("no vLLM answer recorded: python -m tests.render.record_vllm_render --new-only")
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


_RANDOM = re.compile(r'((?:chatcmpl-|cmpl-|resp_))[0-9a-f]{32}|("created":)\s*\d+')


def _same_ids(answer) -> str:
    """An answer's JSON with its random request ids (a request without request_id) and times made equal."""
    return _RANDOM.sub(lambda m: (m.group(1) or m.group(2)) + "*", json.dumps(answer, sort_keys=True))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_the_http_face_answers_as_the_rpc(faces, call, case):
    status, rpc = await call(case)
    answer = await faces[1].post(case.path, content=json.dumps(case.body))
    assert answer.status_code == status and answer.headers["content-type"] == "application/json"
    if status == 200:
        assert _same_ids(answer.json()) == _same_ids(rpc)
        return
    # the gateway's transcoded route: vLLM's ErrorResponse, the status details as the transcoder prints them
    details = json_format.MessageToDict(
        rpc.to_status(), preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )["details"]
    param = rpc.violations[0][0] if rpc.violations else None
    assert answer.json() == {
        "error": {
            "message": rpc.message,
            "type": VLLM_TYPES[status],
            "param": param,
            "code": status,
            "details": details,
        }
    }


async def test_the_http_face_refuses_other_paths_and_methods_and_says_health(faces):
    http = faces[1]
    assert (await http.get("/health")).status_code == 200
    wrong = await http.get(CHAT_PATH)
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert detail_reason(wrong.json()["error"]) == Reason.METHOD_NOT_ALLOWED
    missing = await http.post("/v1/chat/completions/render/typed", content=b"{}")
    assert missing.status_code == 404 and detail_reason(missing.json()["error"]) == Reason.PATH_NOT_SERVED
    queried = await http.post(CHAT_PATH + "?stream=true", content=b"{}")
    assert queried.status_code == 400 and detail_reason(queried.json()["error"]) == Reason.UNSUPPORTED_FIELD
    assert queried.json()["error"]["param"] == "query"


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
