"""The bounded store of Responses (pipeline_svc/response_store.py): count, bytes and age bounds, oldest evicted
first; and what a turn of `previous_response_id` sends render (pipeline_svc/responses_turn.py)."""

from __future__ import annotations

import json

import pytest

from pipeline_svc import responses_turn
from pipeline_svc.response_peers import Peers, StoredResponses
from pipeline_svc.response_store import ResponseStore, json_size
from pipeline_svc.responses_background import BackgroundRuns, Run
from pipeline_svc.responses_response import ResponseStream
from scaleout_common.errors import ServiceError
from scaleout_common.identity import Caller
from tests.pipeline.test_api_shapes import _rendered

ANYONE = Caller(None)  # no API keys


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def response(number: int, text: str = "hi") -> dict:
    return {"id": f"resp_{number:032x}", "object": "response", "output": [{"type": "message", "text": text}]}


def test_the_oldest_goes_first_when_full():
    store = ResponseStore(max_count=3, max_bytes=1 << 20, ttl_s=60)
    for number in range(5):
        assert store.put(response(number), [])
    assert [store.get(response(n)["id"]) is not None for n in range(5)] == [False, False, True, True, True]
    assert len(store) == 3


def test_bytes_bound_evicts_until_it_fits_and_refuses_one_too_large():
    one = json_size(response(0, "x" * 100)) + json_size([])
    store = ResponseStore(max_count=100, max_bytes=one * 2, ttl_s=60)
    for number in range(3):
        store.put(response(number, "x" * 100), [])
    assert store.get(response(0)["id"]) is None and store.bytes == one * 2
    assert not store.put(response(9, "x" * 10_000), [])
    assert store.get(response(9)["id"]) is None and store.bytes == one * 2


def test_an_expired_response_is_gone():
    clock = Clock()
    store = ResponseStore(max_count=10, max_bytes=1 << 20, ttl_s=10, clock=clock)
    store.put(response(1), [])
    clock.now = 5
    store.put(response(2), [])
    clock.now = 10.5
    assert store.get(response(1)["id"]) is None and store.get(response(2)["id"]) is not None
    store.put(response(3), [])  # an insert drops the expired ones at the front too
    clock.now = 16
    store.put(response(4), [])
    assert len(store) == 2 and store.bytes == 2 * (json_size(response(3)) + json_size([]))


def test_delete_and_replace():
    store = ResponseStore(max_count=10, max_bytes=1 << 20, ttl_s=60)
    store.put(response(1, "a"), ["first"])
    store.put(response(1, "bb"), ["second"])
    kept = store.get(response(1)["id"])
    assert len(store) == 1 and kept is not None and kept.input_items == ["second"]
    assert store.delete(response(1)["id"]) and not store.delete(response(1)["id"]) and store.bytes == 0


def stored(size: int = 10) -> StoredResponses:
    return StoredResponses(
        store := ResponseStore(size, 1 << 20, 60), Peers("", 4), BackgroundRuns(store, 4), "127.0.0.1:1"
    )


def test_ids_name_the_replica():
    here = stored()
    named = here.name("resp_" + "ab" * 16)
    assert named.startswith("resp_" + here.tag) and len(named) == len("resp_") + 32


async def test_a_turn_continues_the_stored_conversation():
    here = stored()
    first = {
        "id": here.name("resp_" + "0" * 32),
        "output": [
            {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "Hm."}]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello Ada.", "annotations": [], "logprobs": [{"x": 1}]}],
            },
        ],
    }
    here.store.put(first, [{"role": "user", "content": "I am Ada."}])
    body = {"input": "Who am I?", "previous_response_id": first["id"], "store": False, "instructions": "Be brief."}
    turn = await responses_turn.begin(json.dumps(body).encode(), here, ANYONE, None)
    sent = json.loads(turn.render_body.data)
    assert "previous_response_id" not in sent and "store" not in sent and sent["instructions"] == "Be brief."
    assert sent["input"] == [
        {"role": "user", "content": "I am Ada."},
        first["output"][0],
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello Ada."}]},
        {"role": "user", "content": "Who am I?"},
    ]
    assert turn.input_items == sent["input"] and not turn.store
    assert (turn.echo["store"], turn.echo["previous_response_id"]) == (False, first["id"])


@pytest.mark.parametrize(
    ("body", "size", "reason", "field"),
    [
        ({"input": "hi", "previous_response_id": "resp_" + "0" * 32}, 10, "RESPONSE_NOT_FOUND", "previous_response_id"),
        # OpenAI's (and SGLang's test_openai_server test_error): an id of another form is a 400, not looked up
        ({"input": "hi", "previous_response_id": "nope"}, 10, "INVALID_REQUEST", "previous_response_id"),
        ({"input": "hi", "store": "yes"}, 10, "INVALID_REQUEST", "store"),
        ({"input": "hi", "store": True}, 0, "UNSUPPORTED_FIELD", "store"),
        ({"input": "hi", "background": True, "store": False}, 10, "INVALID_REQUEST", "background"),  # vLLM's words
        ({"input": "hi", "background": True}, 0, "UNSUPPORTED_FIELD", "background"),  # nothing stored here
        ({"input": "hi", "background": 1}, 10, "INVALID_REQUEST", "background"),
        ({"input": "hi", "background": True, "stream": "yes"}, 10, "INVALID_REQUEST", "stream"),  # render sees true
    ],
)
async def test_a_turn_refuses(body, size, reason, field):
    with pytest.raises(ServiceError) as caught:
        await responses_turn.begin(json.dumps(body).encode(), stored(size), ANYONE, None)
    assert (caught.value.reason, caught.value.violations[0][0]) == (reason, field)


async def test_a_background_turn_renders_a_stream_and_echoes_what_was_asked():
    turn = await responses_turn.begin(b'{"input": "hi", "background": true}', stored(10), ANYONE, None)
    sent = json.loads(turn.render_body.data)
    assert turn.background and turn.store and "background" not in sent and sent["stream"] is True
    assert (turn.echo["background"], turn.echo.get("stream")) == (True, None)


async def test_storing_follows_the_store_being_on():
    assert (await responses_turn.begin(b'{"input": "hi"}', stored(10), ANYONE, None)).store
    assert not (await responses_turn.begin(b'{"input": "hi"}', stored(0), ANYONE, None)).store


def test_a_background_response_outgrowing_the_store_is_kept_failed_not_stale():
    store = ResponseStore(max_count=4, max_bytes=4096, ttl_s=60)
    run = Run(BackgroundRuns(store, 1), ResponseStream(_rendered("resp_"), {"input": "hi"}), ["hi"], None, False)
    run._keep(run.shape.snapshot("in_progress"))
    run._keep(run.response | {"status": "completed", "output": [{"text": "x" * 8192}]})  # larger than the store
    stored = store.get(run.id)
    assert stored is not None and stored.response["status"] == "failed" and stored.response["output"] == []
    assert "larger than the response store" in stored.response["error"]["message"]
