"""Resuming a background Response's stream (`GET /v1/responses/{id}?stream=true&starting_after=N`) with two
pipeline replicas behind Envoy, through the official `openai` SDK (`responses.retrieve(id, stream=True,
starting_after=N)`): a client that dropped the create call's stream picks it up live, through Envoy and on each
replica over gRPC (one of them not the owner), none lost or twice, to the end; a finished one is replayed from
any cursor; a cancelled one ends in-band for its followers; what cannot be resumed is refused by name."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from scaleout.v1 import responses_pb2, responses_pb2_grpc
from tests.sdks import openai_sdk
from tests.two_pipelines.test_responses_background import SHORT, _load, _until

pytestmark = pytest.mark.slow

# Still decoding when resumed (a few seconds on CPU), short enough to be read to its end.
RUNNING = {"input": "Write a story about a cat.", "max_output_tokens": 96, "extra_body": {"ignore_eos": True}}
# ~a minute of decoding on CPU: cancelled long before its end
LONG = RUNNING | {"max_output_tokens": 4000}


@pytest.fixture(scope="module")
def sdk(stack):
    with openai_sdk(stack.rest_url, timeout=60) as client:
        yield client


def _dumps(events) -> list[dict]:
    return [event.model_dump(exclude_unset=True) for event in events]


def _over_grpc(stack, port: int, response_id: str, starting_after: int) -> list[dict]:
    """The events RetrieveResponse streams from one replica, as JSON."""
    request = responses_pb2.GetResponseRequest(response_id=response_id, stream=True, starting_after=starting_after)
    with stack.grpc_channel(f"127.0.0.1:{port}") as channel:
        bodies = responses_pb2_grpc.ResponsesServiceStub(channel).RetrieveResponse(request, timeout=60)
        return [json.loads(body.data.split(b"data: ", 1)[1]) for body in bodies]


def test_a_dropped_stream_resumes_live_on_either_replica(stack, sdk):
    read = []
    with sdk.responses.create(background=True, stream=True, **RUNNING) as stream:
        for event in stream:
            read.append(event)
            if event.type == "response.output_text.delta" and len(read) >= 6:
                break  # the client drops its stream; the run goes on
    response_id, cursor = read[0].response.id, read[-1].sequence_number
    ports = [r.bound_port for r in stack.replicas if r.name.startswith("chat-")]
    with ThreadPoolExecutor(3) as pool:
        through_envoy = pool.submit(
            lambda: list(sdk.responses.retrieve(response_id, stream=True, starting_after=cursor))
        )
        direct = [pool.submit(_over_grpc, stack, port, response_id, cursor) for port in ports]
        assert sdk.responses.retrieve(response_id).status == "in_progress"  # the followers started while it ran
        resumed = through_envoy.result(timeout=120)
        assert [f.result(timeout=120) for f in direct] == [_dumps(resumed)] * 2
    assert [e.sequence_number for e in resumed] == list(range(cursor + 1, cursor + 1 + len(resumed)))
    assert resumed[-1].type == "response.incomplete"  # max_output_tokens, ignore_eos
    assert resumed[-1].response.model_dump() == sdk.responses.retrieve(response_id).model_dump()
    assert _dumps(sdk.responses.retrieve(response_id, stream=True)) == _dumps(read + resumed)  # replayed whole


def test_a_finished_stream_is_replayed_from_any_cursor(sdk):
    events = list(sdk.responses.create(input="Name a fruit.", background=True, stream=True, **SHORT))
    response_id, last = events[0].response.id, events[-1].sequence_number
    assert _dumps(sdk.responses.retrieve(response_id, stream=True)) == _dumps(events)
    assert _dumps(sdk.responses.retrieve(response_id, stream=True, starting_after=2)) == _dumps(events[3:])
    assert list(sdk.responses.retrieve(response_id, stream=True, starting_after=last)) == []
    for past in (last + 1, -1):
        with pytest.raises(openai.BadRequestError) as caught:
            sdk.responses.retrieve(response_id, stream=True, starting_after=past)
        assert (caught.value.code, caught.value.param) == ("STARTING_AFTER_OUT_OF_RANGE", "starting_after")


def test_a_cancelled_run_ends_its_followers_streams(stack, sdk):
    with sdk.responses.create(background=True, stream=True, **LONG) as stream:
        first = next(iter(stream))
    response_id = first.response.id
    with sdk.responses.retrieve(response_id, stream=True, starting_after=0) as follower:
        events = [next(iter(follower))]  # following it live
        assert sdk.responses.cancel(response_id).status == "cancelled"
        events += list(follower)
    assert events[-1].type == "error" and events[-1].code == "RESPONSE_CANCELLED"
    assert [e.sequence_number for e in events] == list(range(1, len(events) + 1))
    _until(lambda: (load := _load(stack)).running + load.waiting + load.kv_blocks_used == 0, "idle engine", 10)


def test_what_cannot_be_resumed_is_refused_by_name(sdk):
    polled = sdk.responses.create(input="Hello!", background=True, **SHORT)  # background, not streamed
    synchronous = sdk.responses.create(input="Hello!", **SHORT)
    for response, words in ((polled, "stream=true"), (synchronous, "background=true")):
        with pytest.raises(openai.BadRequestError, match=f"not created with {words}") as caught:
            sdk.responses.retrieve(response.id, stream=True)
        assert (caught.value.code, caught.value.param) == ("RESPONSE_NOT_STREAMABLE", "stream")
    with pytest.raises(openai.NotFoundError) as missing:
        sdk.responses.retrieve("resp_" + "0" * 40, stream=True, starting_after=3)
    assert missing.value.code == "RESPONSE_NOT_FOUND"
    for fields, name in (
        ({"starting_after": 1}, "starting_after"),
        ({"stream": True, "include_obfuscation": True}, "include_obfuscation"),
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            sdk.responses.retrieve(polled.id, **fields)
        assert (caught.value.code, caught.value.param) == ("UNSUPPORTED_FIELD", name)
