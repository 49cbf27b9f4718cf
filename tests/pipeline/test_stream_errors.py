"""Every streamed route ends with its API's own in-band error when a hop fails after the stream started, under one
rule (pipeline_svc.hops.broken_off): UPSTREAM_LOST unless the upstream typed it; a failure before the first byte
is raised (a typed status, an HTTP error). Fakes on loopback (tests/pipeline/fakes.py)."""

from __future__ import annotations

import json

import grpc
import pytest
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from pipeline_svc.anthropic_service import AnthropicFrontDoor
from pipeline_svc.chat import ChatPipeline
from pipeline_svc.engine_stream import EngineStreamRelay
from pipeline_svc.openai_service import OpenAIFrontDoor
from pipeline_svc.responses_service import ResponsesFrontDoor
from scaleout.v1 import engine_pb2, render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail
from tests.pipeline.fakes import OUTPUT, Context, Derender, Engine, body, ended, hops_over, stored_responses

USER = [{"role": "user", "content": "hi"}]
RESPONSES_EVENT = TypeAdapter(ResponseStreamEvent)


def _events(bodies) -> list[tuple[str, dict | str]]:
    """(SSE event name or "", its data) of each HttpBody."""
    out = []
    for b in bodies:
        name = next((line[7:] for line in b.data.decode().splitlines() if line.startswith("event: ")), "")
        data = next(line[6:] for line in b.data.decode().splitlines() if line.startswith("data: "))
        out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


def _openai(events) -> dict:
    """OpenAI's stream: chunks, then `data: {"error": ...}` and `data: [DONE]`."""
    assert events[-1] == ("", "[DONE]") and "choices" in events[0][1], events
    return events[-2][1]["error"]


def _anthropic(events) -> dict:
    assert events[0][0] == "message_start" and events[-1][0] == "error", events
    assert events[-1][1]["type"] == "error"
    return events[-1][1]["error"]


def _responses(events) -> dict:
    """`error` (the stable reason as `code`), then `response.failed` with the output so far."""
    for _, data in events:
        RESPONSES_EVENT.validate_python(data, strict=True)
    assert [name for name, _ in events[-2:]] == ["error", "response.failed"], events
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed" and failed["error"]["code"] in ("server_error", "rate_limit_exceeded")
    assert failed["output"] and failed["output"][-1]["status"] == "incomplete"  # the message cut short
    return {"code": events[-2][1]["code"], "message": events[-2][1]["message"]}


# route -> (call it, the terminal error's {"code": reason, ...} from what it streamed)
ROUTES = {
    "openai chat": (
        lambda hops: OpenAIFrontDoor(hops).ChatCompletions(body({"messages": USER, "stream": True}), Context()),
        lambda out: _openai(_events(out)),
    ),
    "openai completion": (
        lambda hops: OpenAIFrontDoor(hops).Completions(body({"prompt": "hi", "stream": True}), Context()),
        lambda out: _openai(_events(out)),
    ),
    "anthropic": (
        lambda hops: AnthropicFrontDoor(hops).CreateMessage(
            body({"model": "smol", "messages": USER, "max_tokens": 8, "stream": True}), Context()
        ),
        lambda out: _anthropic(_events(out)),
    ),
    "responses": (
        lambda hops: ResponsesFrontDoor(hops, stored_responses()).CreateResponse(
            body({"input": "hi", "stream": True}), Context()
        ),
        lambda out: _responses(_events(out)),
    ),
    "typed chat": (
        lambda hops: ChatPipeline(hops).StreamChatCompletion(render_pb2.RenderChatRequest(), Context()),
        lambda out: {"code": ServiceError.from_status(out[-1].error).reason} if out[-1].HasField("error") else {},
    ),
    "raw engine stream": (
        lambda hops: EngineStreamRelay(hops).Generate(engine_pb2.GenerateRequest(token_ids=[1]), Context()),
        lambda out: {"code": ServiceError.from_status(out[-1].error).reason} if out[-1].HasField("error") else {},
    ),
}


async def _stream(route: str, engine: Engine, derender: Derender) -> list:
    call, _ = ROUTES[route]
    async with hops_over(engine, derender) as hops:
        try:
            return [message async for message in call(hops)]
        finally:  # no hop call is left running (the raw engine stream makes no derender call)
            await ended(engine, *([] if route == "raw engine stream" else [derender]))


@pytest.mark.parametrize("route", ROUTES)
async def test_an_untyped_failure_after_the_start_ends_in_band_as_upstream_lost(route):
    out = await _stream(route, Engine([OUTPUT, OUTPUT, grpc.StatusCode.UNAVAILABLE]), Derender())
    error = ROUTES[route][1](out)
    assert error["code"] == Reason.UPSTREAM_LOST, error


@pytest.mark.parametrize("route", ROUTES)
async def test_a_typed_failure_after_the_start_ends_in_band_with_its_reason(route):
    exited = fail(Reason.ENGINE_CORE_EXITED, "the engine core process exited")
    out = await _stream(route, Engine([OUTPUT, OUTPUT, exited]), Derender())
    error = ROUTES[route][1](out)
    assert error["code"] == Reason.ENGINE_CORE_EXITED, error


@pytest.mark.parametrize("route", [r for r in ROUTES if r != "raw engine stream"])
async def test_a_derender_failure_after_the_start_is_upstream_lost_too(route):
    out = await _stream(route, Engine([OUTPUT] * 5), Derender(fail_after=(2, grpc.StatusCode.UNAVAILABLE)))
    assert ROUTES[route][1](out)["code"] == Reason.UPSTREAM_LOST


@pytest.mark.parametrize("route", ROUTES)
async def test_a_failure_before_the_first_byte_is_raised_typed(route):
    with pytest.raises(ServiceError) as raised:
        await _stream(route, Engine([grpc.StatusCode.UNAVAILABLE]), Derender())
    assert (raised.value.code, raised.value.reason) == (grpc.StatusCode.UNAVAILABLE, Reason.UPSTREAM_UNAVAILABLE)
