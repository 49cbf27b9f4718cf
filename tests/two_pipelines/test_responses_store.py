"""Stored Responses with two pipeline replicas behind Envoy, through the official `openai` SDK: `store`,
`responses.retrieve`, `responses.delete` and `previous_response_id` chains, whichever replica each call lands
on (each replica is also asked directly, over gRPC, for what the other stored); SMG's body (`store: true`,
`min_p`, ...) as it forwards it."""

from __future__ import annotations

import json

import grpc
import openai
import pytest
from google.api import httpbody_pb2

from scaleout.v1 import responses_pb2, responses_pb2_grpc
from tests.gateway.rest import post

pytestmark = pytest.mark.slow

ASKED = {"temperature": 0, "max_output_tokens": 16}
# SMG 1.13 forwards `/v1/responses` bodies with these added (captured in front of an echo server).
SMG_ADDS = {"store": True, "temperature": 1.0, "priority": 0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}


@pytest.fixture(scope="package")
def replicas(stack):
    """A ResponsesService stub on each pipeline replica itself (not through Envoy)."""
    channels = [stack.grpc_channel(f"127.0.0.1:{r.bound_port}") for r in stack.replicas if r.name.startswith("chat-")]
    assert len(channels) == 2
    yield [responses_pb2_grpc.ResponsesServiceStub(channel) for channel in channels]
    for channel in channels:
        channel.close()


def stored_on_each(replicas, response_id: str) -> list[dict]:
    return [json.loads(s.GetResponse(responses_pb2.GetResponseRequest(response_id=response_id)).data) for s in replicas]


def create_on(replica, **body) -> dict:
    """A unary CreateResponse on that replica itself."""
    request = httpbody_pb2.HttpBody(content_type="application/json", data=json.dumps(body).encode())
    [answer] = list(replica.CreateResponse(request))
    return json.loads(answer.data)


def test_store_retrieve_and_delete_on_any_replica(client, model_id, replicas):
    response = client.responses.create(model=model_id, input="Name a color.", store=True, **ASKED)
    assert response.store is True and response.previous_response_id is None
    for _ in range(4):  # Envoy alternates the replicas
        assert client.responses.retrieve(response.id).model_dump() == response.model_dump()
    first, second = stored_on_each(replicas, response.id)  # the owner's own answer, and the other's via it
    assert first == second and (first["id"], first["output"][0]["content"][0]["text"]) == (
        response.id,
        response.output_text,
    )
    client.responses.delete(response.id)
    for _ in range(2):
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.retrieve(response.id)
        assert caught.value.code == "RESPONSE_NOT_FOUND"
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(response.id)


def test_store_is_the_default_and_false_keeps_nothing(client, model_id):
    kept = client.responses.create(model=model_id, input="Hi", **ASKED)
    assert kept.store is True and client.responses.retrieve(kept.id).id == kept.id
    gone = client.responses.create(model=model_id, input="Hi", store=False, **ASKED)
    assert gone.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(gone.id)


def test_a_streamed_response_is_stored_as_it_completed(client, model_id):
    events = list(client.responses.create(model=model_id, input="Name a fruit.", stream=True, **ASKED))
    final = events[-1].response
    assert events[-1].type == "response.completed" and final.store is True
    assert client.responses.retrieve(final.id).model_dump() == final.model_dump()


def test_previous_response_id_across_replicas(client, model_id, replicas, stack):
    """Each turn is stored by one replica and continued on the other; the prompt is the whole conversation, as if
    the client had sent it itself."""
    first = create_on(replicas[0], model=model_id, input="My name is Ada.", **ASKED)
    second = create_on(replicas[1], model=model_id, input="What is my name?", previous_response_id=first["id"], **ASKED)
    assert second["previous_response_id"] == first["id"] and second["id"][5:13] != first["id"][5:13]
    third = client.responses.create(
        model=model_id, input="Say it again.", previous_response_id=second["id"], instructions="Be brief.", **ASKED
    )
    conversation = [
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": first["output"][0]["content"][0]["text"]},
        {"role": "user", "content": "What is my name?"},
        {"role": "assistant", "content": second["output"][0]["content"][0]["text"]},
        {"role": "user", "content": "Say it again."},
    ]
    whole = post(
        stack, "/v1/responses", {"model": model_id, "input": conversation, "instructions": "Be brief.", **ASKED}
    )
    assert third.usage.input_tokens == whole.json()["usage"]["input_tokens"]
    assert third.output_text == whole.json()["output"][0]["content"][0]["text"]  # greedy: the same answer
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model=model_id, input="Hi", previous_response_id="resp_" + "0" * 32, **ASKED)
    assert caught.value.param == "previous_response_id"


def test_a_function_call_continued_by_its_output(client, model_id):
    """The agent loop: the stored function call, then only its output sent back."""
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    call = client.responses.create(
        model=model_id, input="Weather in Paris?", tools=[tool], tool_choice="required", temperature=0
    )
    [item] = call.output
    assert item.type == "function_call"
    answer = client.responses.create(
        model=model_id,
        previous_response_id=call.id,
        input=[{"type": "function_call_output", "call_id": item.call_id, "output": "Sunny, 22 C"}],
        tools=[tool],
        **ASKED,
    )
    assert answer.status in ("completed", "incomplete") and answer.output


def test_smgs_body_is_served_and_stored(stack, client, model_id):
    answer = post(stack, "/v1/responses", {"input": "Hi", "model": model_id, "max_output_tokens": 4, **SMG_ADDS})
    assert answer.status_code == 200, answer.text
    response = answer.json()
    assert response["store"] is True and client.responses.retrieve(response["id"]).id == response["id"]
    refused = post(stack, "/v1/responses", {"input": "Hi", "model": model_id, "min_p": 2.0})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "min_p"


def test_the_replicas_peer_service_is_not_on_the_gateway(stack):
    channel = stack.grpc_channel()
    stub = responses_pb2_grpc.ResponseStoreServiceStub(channel)
    with pytest.raises(grpc.RpcError) as caught:
        stub.FetchStoredResponse(responses_pb2.FetchStoredResponseRequest(response_id="resp_x"), timeout=10)
    assert caught.value.code() in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.NOT_FOUND)
    channel.close()
