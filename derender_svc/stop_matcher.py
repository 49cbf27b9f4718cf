"""Stop strings and SGLang's stop_regex over streamed text: cut at the first stop to complete, hold back possible
starts of a stop string.

A stop_regex is searched (the `regex` module, for its timeout) over the text already shown, its last
REGEX_WINDOW characters, and the new text: a match may begin in text already sent, which then stays sent (the
cut can only take what is not sent yet). Nothing is held back for a pattern: what part of a text could begin a
match is not knowable for a regular expression (SGLang holds nothing back for it either). A search that runs past
REGEX_TIMEOUT_S (a pattern that backtracks without end) fails the request rather than the server's thread.
"""

from __future__ import annotations

import regex

from derender_svc.holdback import partial_suffix_len
from scaleout_common.reasons import Reason, fail

REGEX_WINDOW = 1024  # characters of shown text a stop_regex match may begin in
REGEX_TIMEOUT_S = 0.05  # one search of one pattern; a linear pattern over the window takes ~10 us


class StopMatcher:
    def __init__(
        self,
        stops: list[str],
        include_stop: bool,
        held: str = "",
        matched: str | None = None,
        patterns: tuple[str, ...] = (),
        shown: str = "",
    ):
        self.stops = [s for s in stops if s]
        self.include_stop = include_stop
        self.held = held  # text that may be the start of a stop string
        self.matched = matched  # the stop string (or stop_regex pattern) that ended the text
        self.patterns = [(pattern, regex.compile(pattern)) for pattern in patterns]
        self.shown = shown  # with patterns: the last REGEX_WINDOW characters shown

    @property
    def active(self) -> bool:
        return bool(self.stops or self.patterns)

    def feed(self, text: str, final: bool) -> str:
        """Text that is safe to show. After a match, `matched` is set and later text is dropped."""
        if self.matched is not None:
            return ""
        if not self.active:
            return text
        window = self.held + text
        best = None  # (end, start, stop): the stop that completes first, the longest on a tie
        for stop in self.stops:
            at = window.find(stop)
            if at >= 0 and (best is None or (at + len(stop), at) < best[:2]):
                best = (at + len(stop), at, stop)
        found = self._search(window)
        if found is not None and (best is None or found[:2] < best[:2]):
            best = found
        if best is not None:
            end, start, self.matched = best
            self.held = ""
            return window[: max(end if self.include_stop else start, 0)]
        keep = 0 if final or not self.stops else max(partial_suffix_len(window, stop) for stop in self.stops)
        self.held = window[len(window) - keep :]
        if self.patterns:
            self.shown = (self.shown + window[: len(window) - keep])[-REGEX_WINDOW:]
        return window[: len(window) - keep]

    def _search(self, window: str) -> tuple[int, int, str] | None:
        """The pattern whose match over the shown tail and `window` ends first, in `window`'s offsets (a match that
        begins in the shown tail has a negative start)."""
        text, offset, best = self.shown + window, len(self.shown), None
        for source, pattern in self.patterns:
            try:
                match = pattern.search(text, timeout=REGEX_TIMEOUT_S)
            except TimeoutError:
                raise fail(
                    Reason.INVALID_SAMPLING_PARAM,
                    f"a stop_regex took over {REGEX_TIMEOUT_S * 1000:.0f} ms to search {len(text)} characters",
                    "stop_regex",
                ) from None
            if match is not None and (best is None or (match.end(), match.start()) < best[:2]):
                best = (match.end(), match.start(), source)
        return None if best is None else (best[0] - offset, best[1] - offset, best[2])

    def state(self) -> dict:
        return {"h": self.held, "m": self.matched, "r": self.shown}
