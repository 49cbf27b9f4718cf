"""A streamed background Response's events, kept to be read again: OpenAI's `GET /v1/responses/{id}?stream=true`
and its `starting_after` cursor (the SDK's `responses.retrieve(id, stream=True, starting_after=N)`).

Only a response created with `background` and `stream` both true keeps them (OpenAI's rule: a new stream starts
only from a background response created with stream=true); any other is RESPONSE_NOT_STREAMABLE naming
`stream`. Each event is kept as the SSE bytes the create call sent, so its index is its `sequence_number` (a
stream numbers its events from 0, one by one): `starting_after` N answers from N + 1, and N must be one the
response has sent so far (STARTING_AFTER_OUT_OF_RANGE otherwise: past it the client holds events that never
were). While the run lives its log grows, and every reader, the create call's own included, follows it by index
to its last event: none lost, none twice. Once it ends the log is stored with the Response (response_store: its
bytes count against --response-store-mb; a log that does not fit is dropped, the Response kept) and replayed
from there. A live log is bounded by its run's output (a delta event is ~200 bytes with its text: ~1 MB for a
4,000-token run) times --max-background-responses.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from google.api import httpbody_pb2

from pipeline_svc.shaped_route import SSE, Event, sse
from scaleout.v1 import responses_pb2
from scaleout_common.reasons import Reason, fail


class EventLog:
    """One run's events as sent, in sequence order; `ended` once its last one is in."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.bytes = 0
        self.ended = False
        self._grew = asyncio.Event()  # replaced at each growth: a reader waits on the one it saw

    def add(self, events: list[Event]) -> None:
        for event in events:
            data = sse(event).data
            self.sent.append(data)
            self.bytes += len(data)
        self._wake()

    def end(self) -> None:
        self.ended = True
        self._wake()

    def _wake(self) -> None:
        self._grew.set()
        self._grew = asyncio.Event()

    async def follow(self, starting_after: int | None) -> AsyncIterator[httpbody_pb2.HttpBody]:
        """The events after `starting_after` (None: all), then each one as it comes, until the last."""
        at = 0 if starting_after is None else _checked(starting_after, len(self.sent)) + 1
        while True:
            while at < len(self.sent):
                yield httpbody_pb2.HttpBody(content_type=SSE, data=self.sent[at])
                at += 1
            if self.ended:
                return
            await self._grew.wait()


def _checked(starting_after: int, sent: int) -> int:
    if not 0 <= starting_after < sent:
        sent_so_far = f"0 to {sent - 1}, the events sent so far" if sent else "none: no event was sent yet"
        raise fail(
            Reason.STARTING_AFTER_OUT_OF_RANGE,
            f"`starting_after` must be the sequence number of an event of this response ({sent_so_far})",
            "starting_after",
        )
    return starting_after


def streamable(response: dict, events: EventLog | None) -> EventLog:
    """The response's event log, or RESPONSE_NOT_STREAMABLE (OpenAI's words for one that is not a background one)."""
    if events is not None:
        return events
    if not response.get("background"):
        message = "This response cannot be streamed because it was not created with background=true."
    else:
        message = (
            "This response cannot be streamed because it was not created with stream=true "
            "(or its events outgrew the response store, --response-store-mb)."
        )
    raise fail(Reason.RESPONSE_NOT_STREAMABLE, message, "stream")


def stream_fields(request: responses_pb2.GetResponseRequest) -> bool:
    """Whether the GET asks for events; the cursor and obfuscation only with them, obfuscation never."""
    if not request.stream:
        for name in ("starting_after", "include_obfuscation"):
            if request.HasField(name):
                raise fail(Reason.UNSUPPORTED_FIELD, f"`{name}` applies only with `stream` = true", name)
    if request.include_obfuscation:
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            "`include_obfuscation` = true is not supported: events are never obfuscated",
            "include_obfuscation",
        )
    return request.stream
