"""Mistral tool calls, both formats: text, then `[TOOL_CALLS]` and a JSON list of
`{"name": ..., "arguments": {...}}` objects (v3), or `[TOOL_CALLS]name[ARGS]{...}` once per call (v11+)."""

from __future__ import annotations

from derender_svc.holdback import split_at_marker
from derender_svc.parsers.base import ToolCallDelta
from derender_svc.parsers.json_call import CallListParser, JsonCallScanner, advance_nesting

MARKER, ARGS = "[TOOL_CALLS]", "[ARGS]"


class MistralToolParser(CallListParser):
    markers = (MARKER, ARGS)

    @classmethod
    def initial_state(cls) -> dict:
        # mode: lead (before a marker) | open (after one) | calls (inside a v3 list) | name, args, between
        #       (v11 calls) | content (the rest is text)
        return {
            "mode": "lead",
            "held": "",
            "calls": 0,
            "call": None,
            "name": "",
            "depth": 0,
            "in_str": False,
            "escape": False,
        }

    def feed(self, text: str, final: bool) -> tuple[str, list[ToolCallDelta]]:
        text, self.held = self.held + text, ""
        content, deltas = [], []
        while text or final:
            mode = self.mode
            if mode == "lead":
                before, marker, text = split_at_marker(text, MARKER)
                content.append(before)
                if marker is None:
                    self._wait(text, final, content)
                    break
                self.mode = "open"
            elif mode == "open":
                opening = text.lstrip()
                if not opening:  # a marker and nothing after it (yet)
                    self.mode = "content" if final else "open"
                    break
                self.mode, text = ("calls", opening[1:]) if opening.startswith("[") else ("name", opening)
            elif mode == "name":
                name, marker, text = split_at_marker(text, ARGS)
                self.name += name
                if marker is None:
                    if final:  # a marker and a name but no arguments: not a call
                        content.append(MARKER + self.name + text)
                        self.mode = "content"
                        break
                    self.held = text
                    break
                deltas.append(ToolCallDelta(self.calls, name=self.name.strip()))
                self.mode, self.depth = "args", 0
            elif mode == "args":
                text = self._args(text, final, deltas)
                if self.mode == "args":
                    break
            elif mode == "between":  # after a v11 call: the next marker (whitespace dropped) or plain text
                opening = text.lstrip()
                if opening.startswith(MARKER):
                    self.mode, text = "lead", opening
                elif final or (opening and not MARKER.startswith(opening)):
                    self.mode = "content"
                else:
                    self.held = text
                    break
            elif mode == "calls":
                text = self._list(text, final, deltas)
                if self.mode == "calls":
                    break
            else:  # content
                content.append(text)
                break
        return "".join(content), deltas

    def _wait(self, text: str, final: bool, content: list[str]) -> None:
        if final:
            content.append(text)
        else:
            self.held = text

    def _args(self, text: str, final: bool, deltas: list[ToolCallDelta]) -> str:
        """Stream one v11 arguments object; after it, another `[TOOL_CALLS]` or plain text."""
        out, used = [], 0
        for used, ch in enumerate(text, 1):  # noqa: B007 (read after the loop)
            if self.depth == 0 and ch.isspace():
                continue
            out.append(ch)
            advance_nesting(self, ch)
            if self.depth <= 0:
                break
        if out:
            deltas.append(ToolCallDelta(self.calls, arguments="".join(out)))
        if (self.depth <= 0 and out) or final:
            if not out and self.depth == 0:
                deltas.append(ToolCallDelta(self.calls, arguments="{}"))
            self.calls, self.name, self.depth, self.mode = self.calls + 1, "", 0, "between"
            return text[used:]
        return ""

    def _list(self, text: str, final: bool, deltas: list[ToolCallDelta]) -> str:
        """The v3 list: JSON call objects until `]`."""
        while text:
            if self.call is None:
                text = text.lstrip().lstrip(",").lstrip()
                if text.startswith("]"):
                    self.mode = "content"
                    return text[1:]
                if not text:
                    break
                self.call = JsonCallScanner().state()
            scanner = JsonCallScanner(**self.call)
            new, used = scanner.feed(text, self.calls)
            deltas += new
            text, self.call = text[used:], scanner.state()
            if scanner.at in ("done", "bad"):
                text = self._close(scanner, deltas) + text
                if self.mode != "calls":
                    return text
        if final and self.call is not None:
            text = self._close(JsonCallScanner(**self.call), deltas) + text
        if final and self.mode == "calls":
            self.mode = "content"
        return text
