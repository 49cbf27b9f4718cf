"""The responses one pipeline replica stored (`store: true`), in its memory, bounded three ways.

At most `max_count` responses and `max_bytes` of their JSON (the Response, its conversation and, for a streamed
background one, its events: response_events), each for at most `ttl_s`: adding one past a bound evicts the
oldest first, and an expired one is gone when next looked at (or evicted with the oldest). A response larger than
`max_bytes` alone is not kept. A replica's store dies with it: ids are not durable, and an id that is gone
answers RESPONSE_NOT_FOUND like one never stored. Each one remembers its owner (the caller's client name under
API keys) for response_peers to scope it.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from pipeline_svc.response_events import EventLog

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stored:
    response: dict  # the Response object as it was answered
    input_items: list  # the conversation before its output (Responses input items)
    size: int  # bytes of the Response and conversation as JSON, and of the events
    expires: float  # on the store's clock
    owner: str | None = None  # the client that stored it (None: no API keys)
    events: EventLog | None = None  # a streamed background response's events, once it ended


def json_size(value) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


class ResponseStore:
    def __init__(self, max_count: int, max_bytes: int, ttl_s: float, clock: Callable[[], float] = time.monotonic):
        self.max_count, self.max_bytes, self.ttl_s, self._clock = max_count, max_bytes, ttl_s, clock
        self._entries: OrderedDict[str, Stored] = OrderedDict()  # oldest first
        self.bytes = 0

    @property
    def enabled(self) -> bool:
        return self.max_count > 0 and self.max_bytes > 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, response: dict, input_items: list, owner: str | None = None, events: EventLog | None = None) -> bool:
        """Keep `response` (by its id) with its conversation and its ended `events`; False when they are larger
        than the whole store."""
        size = json_size(response) + json_size(input_items) + (events.bytes if events is not None else 0)
        if not self.enabled or size > self.max_bytes:
            log.warning("response %s not stored: %d bytes, the store holds %d", response["id"], size, self.max_bytes)
            return False
        now = self._clock()
        self._drop(response["id"])
        while self._entries:  # oldest first: the expired (one TTL for all), then what the bounds leave no room for
            oldest = next(iter(self._entries.values()))
            full = len(self._entries) >= self.max_count or self.bytes + size > self.max_bytes
            if not full and oldest.expires > now:
                break
            self._drop(oldest.response["id"])
        self._entries[response["id"]] = Stored(response, input_items, size, now + self.ttl_s, owner, events)
        self.bytes += size
        return True

    def get(self, response_id: str) -> Stored | None:
        stored = self._entries.get(response_id)
        if stored is not None and stored.expires <= self._clock():
            self._drop(response_id)
            return None
        return stored

    def delete(self, response_id: str) -> bool:
        return self.get(response_id) is not None and self._drop(response_id)

    def _drop(self, response_id: str) -> bool:
        stored = self._entries.pop(response_id, None)
        if stored is None:
            return False
        self.bytes -= stored.size
        return True
