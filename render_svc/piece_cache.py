"""Token ids of long prompt pieces already tokenized, so a conversation's history is tokenized once.

Routers call render on every turn, and every turn's prompt repeats the whole conversation before it (and often
one long system prompt across conversations). render_svc/tokens.py cuts a prompt at the added tokens the
tokenizer itself splits at (chat templates put one around every message); a long piece between two of them
tokenizes to the same ids wherever it appears, so its ids are kept here, keyed by its text, least recently used
out first within a byte budget (the text's and the ids' sizes, as counted by `cost`).
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections import OrderedDict


def cost(text: str, ids: array) -> int:
    return sys.getsizeof(text) + ids.itemsize * len(ids) + 200  # the entry and the array's header


class PieceCache:
    def __init__(self, budget_bytes: int):
        self.budget = budget_bytes
        self.size = 0
        self._entries: OrderedDict[str, array] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, text: str) -> list[int] | None:
        with self._lock:
            ids = self._entries.get(text)
            if ids is None:
                self.misses += 1
                return None
            self._entries.move_to_end(text)
            self.hits += 1
        return ids.tolist()

    def put(self, text: str, ids: list[int]) -> None:
        stored = array("i", ids)
        size = cost(text, stored)
        if size > self.budget:
            return
        with self._lock:
            old = self._entries.pop(text, None)
            if old is not None:
                self.size -= cost(text, old)
            self._entries[text] = stored
            self.size += size
            while self.size > self.budget:
                evicted, evicted_ids = self._entries.popitem(last=False)
                self.size -= cost(evicted, evicted_ids)
