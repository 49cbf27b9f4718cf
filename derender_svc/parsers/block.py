"""The engine most tool parsers share: text, then call blocks between markers (optionally inside a section).

Why whole calls: a call is emitted only once its block is complete and its arguments are valid JSON
(`arguments.py`), so a streamed parse can never show something the one-shot parse would call content, and
every chunking gives the one-shot result by construction. The cost is that arguments arrive per call, not
per token. Work per chunk is proportional to the chunk: only new text is scanned, markers split over chunks
are held back (`scan.py`), a block's body is kept until it closes.

A format declares its markers, how a body ends, and `parse(opener, body, closed)` -> calls or None. A block
that does not parse is shown as text (`opener + body + closer`); inside a section, the section's text is held
until its first valid call and shown whole if none comes. A call (or section) the output ends inside is text in
a one-shot answer, and dropped from a stream's (`streamed`): vLLM's streaming shows nothing for it. Whitespace (and `GAP` characters) between calls is
dropped.
"""

from __future__ import annotations

from derender_svc.parsers.arguments import emit
from derender_svc.parsers.base import StatefulParser, ToolCallDelta
from derender_svc.parsers.scan import opening, split_markers

Call = tuple[str, str]  # (name, arguments JSON)


class BlockToolParser(StatefulParser):
    SECTION: tuple[tuple[str, ...], tuple[str, ...]] | None = None  # (openers, closers) around the calls
    CALLS: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (call opener, its closers); no closers: the value ends it
    KEEP_OPENER: tuple[str, ...] = ()  # openers that are the first characters of the body (`{"`, `[`)
    TRACK = ""  # "json" | "python": closers count only outside strings, and brackets are counted
    VALUE_ENDS = False  # the body ends when its bracketed value closes
    GAP = ""  # characters dropped with whitespace between calls
    DROP_AFTER: tuple[str, ...] = ()  # markers dropped right after a call (`<|python_end|>`)
    tools: tuple = ()  # the request's tools (proto or dict), for formats typed by the schema; not state
    streamed = False  # a stream's answer: a call the output ends inside is dropped, not shown (vLLM); not state

    @classmethod
    def initial_state(cls) -> dict:
        return {
            "held": "",
            "mode": "text",  # text | section | call
            "gap": True,  # at the start or right after a call: whitespace before a call is not content
            "calls": 0,
            "opener": "",
            "body": "",
            "pending": "",  # a section's text until its first valid call
            "valid": False,  # the open section has a valid call
            "open": "",  # the brackets open in the body, innermost last
            "quote": "",
            "escape": False,
            "viable": None,  # the body could still be a call (None: undecided)
        }

    @property
    def markers(self) -> tuple[str, ...]:
        section = self.SECTION or ((), ())
        tags = {tag for opener, closers in self.CALLS for tag in (opener, *closers)}
        return tuple({*section[0], *section[1], *tags, *self.DROP_AFTER})

    def parse(self, opener: str, body: str, closed: bool) -> list[Call] | None:
        raise NotImplementedError

    def can_call(self, body: str) -> bool | None:
        """Can `body` (so far) still be a call? Decided early, so prose is not held until its bracket closes."""
        if self.TRACK == "json" and self.VALUE_ENDS and body.strip():
            return body.lstrip()[0] in "{["
        return True if body.strip() else None

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        text, self.held = self.held + text, ""
        content: list[str] = []
        deltas: list[ToolCallDelta] = []
        while True:
            if self.mode == "call":
                text, done = self._call(text, final, content, deltas)
                if not done:
                    break
            elif self.gap:
                after = self._after_call(text, final)
                if after is None:
                    break
                text, self.gap = after, False
            elif self.mode == "section":
                text = self._section(text, final, content)
                if self.mode == "section":
                    break
            else:
                before, marker, text = split_markers(text, self._openers(), final)
                content.append(before)
                if marker is None:
                    self.held = text
                    break
                if self.SECTION:
                    self.mode, self.pending, self.valid = "section", marker, False
                else:
                    self._open(marker)
        if final:
            cut = self.pending if self.mode == "section" and not self.valid and not self.streamed else ""
            content.append(self.held + cut)
            self.held, self.pending = "", ""
        return "".join(content), deltas

    def _openers(self) -> tuple[str, ...]:
        return self.SECTION[0] if self.SECTION else tuple(opener for opener, _ in self.CALLS)

    def _after_call(self, text: str, final: bool) -> str | None:
        """The text after a call with the whitespace (and dropped markers) before the next call removed; None
        (text held) while that cannot be decided yet. Whitespace before plain text is content."""
        blank = " \t\r\n" + self.GAP
        rest, after_drop = text.lstrip(blank), None
        for marker in self.DROP_AFTER:
            if rest.startswith(marker):
                after_drop = rest[len(marker) :]
                rest = after_drop.lstrip(blank)
        if not final and any(m.startswith(rest) for m in self.DROP_AFTER):
            self.held = text
            return None
        marker, decided = opening(rest, self._openers(), final)
        if not decided:
            self.held = text
            return None
        if marker is not None or not rest:
            return rest
        return text if after_drop is None else after_drop

    def _open(self, marker: str) -> None:
        self.mode, self.opener = "call", marker
        self.body = marker if marker in self.KEEP_OPENER else ""
        self.open, self.quote, self.escape, self.viable = "", "", False, None
        for ch in self.body:
            self._track(ch)

    def _section(self, text: str, final: bool, content: list[str]) -> str:
        assert self.SECTION is not None  # section mode is entered only by parsers that have a SECTION
        openers = tuple(opener for opener, _ in self.CALLS)
        before, marker, text = split_markers(text, (*openers, *self.SECTION[1]), final)
        if self.valid:
            content.append(before if before.strip() else "")
        else:
            self.pending += before
        if marker is None:
            self.held = text
            return ""
        if marker in openers:
            self._open(marker)
            return text
        if not self.valid:
            content.append(self.pending + marker)
        self.mode, self.pending, self.gap = "text", "", True
        return text

    def _call(self, text: str, final: bool, content: list[str], deltas: list[ToolCallDelta]) -> tuple[str, bool]:
        """Read the open call's body; (rest of the text, whether the call ended)."""
        closers = dict(self.CALLS)[self.opener]
        if self.TRACK:
            part, closer, rest, done = self._scan(text, closers, final)
        else:
            part, closer, rest = split_markers(text, closers, final)
            done = closer is not None
        self.body += part
        if not done and not final:
            self.held = rest
            return "", False
        if not done:  # the output ended inside the call
            self.body += rest
            rest = ""
        closed = closer is not None or (done and self.VALUE_ENDS and self.viable is not False)
        calls = self.parse(self.opener, self.body, closed) if self.viable is not False else None
        raw = (self.opener if self.opener not in self.KEEP_OPENER else "") + self.body + (closer or "")
        self.mode, self.body = ("section" if self.SECTION else "text"), ""
        if calls is not None:  # [] is a valid block with no call (Mistral's empty list): nothing shown
            for call in calls:
                deltas += emit(self.calls, call)
                self.calls += 1
            self.gap, self.valid, self.pending = not self.SECTION, True, ""
        elif self.mode == "section" and not self.valid:
            self.pending += raw
        elif done or not self.streamed:
            content.append(raw)
        return rest, True

    def _scan(self, text: str, closers: tuple[str, ...], final: bool) -> tuple[str, str | None, str, bool]:
        """Bracket- and string-aware body scan: (body part, closer, rest, ended)."""
        for at, ch in enumerate(text):
            if self.quote:
                self._track(ch)
                continue
            for closer in closers:
                if ch == closer[0]:
                    if text.startswith(closer, at):
                        return text[:at], closer, text[at + len(closer) :], True
                    if not final and closer.startswith(text[at:]):
                        return text[:at], None, text[at:], False
            ended = self._track(ch)
            if self.viable is None:
                self.viable = self.can_call(self.body + text[: at + 1])
            if self.viable is False or ended:
                return text[: at + 1], None, text[at + 1 :], True
        return text, None, "", False

    def _track(self, ch: str) -> bool:
        """Advance string/bracket state over `ch`; True when it closed the body's value."""
        if self.quote:
            if self.escape:
                self.escape = False
            elif ch == "\\":
                self.escape = True
            elif ch == self.quote:
                self.quote = ""
            return False
        if ch == '"' or (ch == "'" and self.TRACK == "python"):
            self.quote = ch
        elif ch in "{[(":
            self.open += ch
        elif ch in "}])":
            # A closer ends its own opener and whatever it left open (`[f(a=1), g(b=2]` closes the list, so the
            # good calls are kept); a closer with no opener of its kind is text.
            at = self.open.rfind("{[("["}])".index(ch)])
            if at < 0:
                return False
            self.open = self.open[:at]
            return self.VALUE_ENDS and not self.open
        return False
