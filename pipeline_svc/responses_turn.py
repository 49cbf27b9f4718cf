"""A Responses request's `store`, `background` and `previous_response_id`: the one hop honours them (render keeps
nothing and runs nothing on).

- `store` (a boolean; absent: true while this replica keeps responses, OpenAI's default): the finished Response
  is kept with its conversation (response_store.py, response_peers.py). `store: true` with storing turned off
  (--response-store-size 0) is refused, UNSUPPORTED_FIELD.
- `background` (a boolean; absent: false): the response is answered `queued` at once and generated on
  (responses_background.py); it needs `store` (INVALID_REQUEST "background can only be used when `store` is
  true", vLLM's words, naming `background`; with storing turned off, UNSUPPORTED_FIELD).
- `previous_response_id`: the stored conversation (its input items, then its output items) goes before this
  request's input, as OpenAI chains them; the earlier `instructions` are not carried over (OpenAI's rule).
  RESPONSE_NOT_FOUND (404) names the field for an id no replica holds.
Render gets the body without the three, `input` as the whole conversation; it reads and checks the rest
(render_svc/responses_chat.py). The Response echoes both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from google.api import httpbody_pb2

from pipeline_svc.response_peers import StoredResponses
from scaleout_common.errors import quote
from scaleout_common.identity import Caller
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

STATE_FIELDS = ("store", "background", "previous_response_id")
ID_PREFIX = "resp"  # OpenAI refuses an id of another form (400) before looking it up


@dataclass
class Turn:
    render_body: httpbody_pb2.HttpBody  # the request render converts: the conversation, without STATE_FIELDS
    echo: dict  # the request as the Response echoes it (`store` resolved)
    input_items: list  # the conversation before this turn's output
    store: bool
    background: bool


def as_input(output: list) -> list:
    """A Response's output items as the next turn's input items: text parts keep their type and text (a part's
    logprobs and annotations are the answer's, not the conversation's)."""
    items = []
    for item in output:
        if item.get("type") == "message":
            parts = [{"type": part["type"], "text": part["text"]} for part in item.get("content", [])]
            item = {**item, "content": parts}
        items.append(item)
    return items


def _input_items(value) -> list | None:
    """The request's `input` as a list of items (None: not an input render would take, so render says why)."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return value if isinstance(value, list) else None


async def begin(data: bytes, stored: StoredResponses, who: Caller, time_left: float | None) -> Turn:
    body = load_object(data)
    store = body.get("store")
    if store is None:
        store = stored.store.enabled
    if not isinstance(store, bool):
        raise fail(Reason.INVALID_REQUEST, "`store` must be a boolean", "store")
    if store and not stored.store.enabled:
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            "`store` = true is not supported: this deployment keeps no responses (--response-store-size 0)",
            "store",
        )
    background = body.get("background")
    if background is not None and not isinstance(background, bool):
        raise fail(Reason.INVALID_REQUEST, "`background` must be a boolean", "background")
    if background and not store:
        if body.get("store") is False:
            raise fail(Reason.INVALID_REQUEST, "background can only be used when `store` is true", "background")
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            "`background` = true is not supported: this deployment keeps no responses (--response-store-size 0)",
            "background",
        )
    previous_id = body.get("previous_response_id")
    if previous_id is not None and not isinstance(previous_id, str):
        raise fail(Reason.INVALID_REQUEST, "`previous_response_id` must be a string", "previous_response_id")
    if previous_id and not previous_id.startswith(ID_PREFIX):
        raise fail(
            Reason.INVALID_REQUEST,
            f"Invalid 'previous_response_id': {quote(previous_id)}. Expected an ID that begins with '{ID_PREFIX}'.",
            "previous_response_id",
        )
    conversation = []
    if previous_id:
        previous = await stored.find(previous_id, "previous_response_id", who, time_left)
        conversation = previous.input_items + as_input(previous.response.get("output", []))
    request = {k: v for k, v in body.items() if k not in STATE_FIELDS}
    if background:  # it always runs as a stream (responses_background.py): render sees `stream` true, so check it here
        if not isinstance(body.get("stream", False), bool):
            raise fail(Reason.INVALID_REQUEST, "`stream` must be a boolean", "stream")
        request["stream"] = True
    items = _input_items(body.get("input"))
    if items is not None:
        items = conversation + items
        request["input"] = items
    render_body = httpbody_pb2.HttpBody(content_type="application/json", data=json.dumps(request).encode())
    echo = {**body, "store": store, "background": bool(background), "previous_response_id": previous_id or None}
    return Turn(render_body, echo, items or [], store, bool(background))
