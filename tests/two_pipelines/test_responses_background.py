"""Background Responses (`background: true`) with two pipeline replicas behind Envoy, through the official `openai`
SDK (vLLM's test_stateful background cases, in our terms): answered `queued` at once and polled to `completed`
on either replica; cancelled mid-generation through the replica that does not run it, the engine idle after;
refused without `store`; streamed as usual, and a stream cancelled ends in-band."""

from __future__ import annotations

import json
import time

import openai
import pytest
import requests
from google.api import httpbody_pb2

from scaleout.v1 import engine_pb2, engine_pb2_grpc, responses_pb2, responses_pb2_grpc
from tests.sdks import openai_sdk

pytestmark = pytest.mark.slow

SHORT = {"temperature": 0, "max_output_tokens": 8}
# ~a minute of decoding on CPU: cancelled long before its end
LONG = {"input": "Write a long story about a cat.", "max_output_tokens": 4000, "ignore_eos": True}


@pytest.fixture(scope="module")
def sdk(stack):
    with openai_sdk(stack.rest_url, timeout=60) as client:
        yield client


def _load(stack) -> engine_pb2.GetLoadResponse:
    with stack.grpc_channel() as channel:
        return engine_pb2_grpc.EngineServiceStub(channel).GetLoad(engine_pb2.GetLoadRequest(), timeout=10)


def _until(check, what: str, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"no {what} in {seconds} s"
        time.sleep(0.1)
    return found


def test_answered_queued_then_completed_on_either_replica(sdk):
    created = sdk.responses.create(input="Hello!", background=True, **SHORT)
    assert (created.status, created.background, created.store, created.output) == ("queued", True, True, [])
    done = _until(
        lambda: (r := sdk.responses.retrieve(created.id)).status not in ("queued", "in_progress") and r, "end"
    )
    assert done.status in ("completed", "incomplete") and done.output_text and done.usage is not None
    assert done.background is True
    assert sdk.responses.cancel(created.id).model_dump() == done.model_dump()  # finished: answered as it is


def test_cancelled_mid_generation_through_the_other_replica_frees_the_engine(stack, sdk):
    owner_port, other_port = (r.bound_port for r in stack.replicas if r.name.startswith("chat-"))
    body = httpbody_pb2.HttpBody(content_type="application/json", data=json.dumps(LONG | {"background": True}).encode())
    with stack.grpc_channel(f"127.0.0.1:{owner_port}") as near, stack.grpc_channel(f"127.0.0.1:{other_port}") as far:
        [answer] = responses_pb2_grpc.ResponsesServiceStub(near).CreateResponse(body)
        response_id = json.loads(answer.data)["id"]
        _until(lambda: sdk.responses.retrieve(response_id).status == "in_progress", "in_progress")
        assert _load(stack).running == 1
        cancel = responses_pb2.CancelResponseRequest(response_id=response_id)
        cancelled = json.loads(responses_pb2_grpc.ResponsesServiceStub(far).CancelResponse(cancel).data)
    assert cancelled["status"] == "cancelled" and cancelled["background"] is True
    _until(lambda: (load := _load(stack)).running + load.waiting + load.kv_blocks_used == 0, "idle engine", 10)
    later = sdk.responses.with_raw_response.retrieve(response_id).http_response.json()
    assert later == cancelled and later["output"][0]["status"] == "incomplete"  # the message it cut short
    assert sdk.responses.cancel(response_id).status == "cancelled"  # twice: the same answer


def test_background_needs_store(sdk):
    with pytest.raises(openai.BadRequestError, match="background can only be used when `store` is true") as caught:
        sdk.responses.create(input="What is 13 * 24?", background=True, store=False)
    assert caught.value.param == "background" and caught.value.code == "INVALID_REQUEST"


def test_streamed_with_its_events_and_stored(sdk):
    events = list(sdk.responses.create(input="Name a fruit.", background=True, stream=True, **SHORT))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1]
    assert final.type in ("response.completed", "response.incomplete") and final.response.background is True
    assert sdk.responses.retrieve(final.response.id).model_dump() == final.response.model_dump()


def test_a_streamed_run_cancelled_ends_with_its_reason(stack, sdk):
    body = json.dumps(LONG | {"background": True, "stream": True})
    headers = {"content-type": "application/json"}
    with requests.post(stack.rest_url + "/v1/responses", data=body, headers=headers, stream=True, timeout=60) as answer:
        lines = (line[len("data: ") :] for line in answer.iter_lines(decode_unicode=True) if line.startswith("data: "))
        events = [json.loads(next(lines)) for _ in range(4)]  # created, in_progress, the message item, its part
        cancelled = sdk.responses.cancel(events[0]["response"]["id"])
        events += [json.loads(line) for line in lines]
    assert cancelled.status == "cancelled" and events[-1]["type"] == "error"
    assert events[-1]["code"] == "RESPONSE_CANCELLED"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    _until(lambda: (load := _load(stack)).running + load.waiting + load.kv_blocks_used == 0, "idle engine", 10)
