"""Stop strings over streamed text: cut at the first stop string to complete, hold back possible starts."""

from __future__ import annotations

from derender_svc.holdback import partial_suffix_len


class StopMatcher:
    def __init__(self, stops: list[str], include_stop: bool, held: str = "", matched: str | None = None):
        self.stops = [s for s in stops if s]
        self.include_stop = include_stop
        self.held = held  # text that may be the start of a stop string
        self.matched = matched  # the stop string that ended the text

    def feed(self, text: str, final: bool) -> str:
        """Text that is safe to show. After a match, `matched` is set and later text is dropped."""
        if self.matched is not None:
            return ""
        if not self.stops:
            return text
        window = self.held + text
        best = None  # (end, start, stop): the stop string that completes first, the longest on a tie
        for stop in self.stops:
            at = window.find(stop)
            if at >= 0 and (best is None or (at + len(stop), at) < best[:2]):
                best = (at + len(stop), at, stop)
        if best is not None:
            end, start, self.matched = best
            self.held = ""
            return window[: end if self.include_stop else start]
        keep = 0 if final else max(partial_suffix_len(window, stop) for stop in self.stops)
        self.held = window[len(window) - keep :]
        return window[: len(window) - keep]

    def state(self) -> dict:
        return {"h": self.held, "m": self.matched}
