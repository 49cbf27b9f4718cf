"""MiniCPM-V's escaped newlines: its tokenizer decodes a newline token as the two characters `\\` `n`, so the
text is repaired before the client sees it (vLLM's minicpmv parser does the same). `\\n`, `\\r` and `\\r\\n`
become a newline; code (backtick spans and fences), LaTeX (`$…$`, `$$…$$`, `\\(…\\)`, `\\[…\\]`) and runs of
several backslashes stay as written. Streaming holds back what may still grow into one of those, so every
chunking gives the one-shot result."""

from __future__ import annotations

_OPENERS = (("```", "```"), ("`", "`"), ("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_UNDECIDED = ("`", "``", "$", "\\", "\\r", "\\r\\")  # tails whose meaning the next chunk decides


def recover(text: str, closing: str, final: bool) -> tuple[str, str, str]:
    """(repaired text, the span closer still awaited or "", held-back tail) for `text` read inside `closing`."""
    out: list[str] = []
    at = 0
    while at < len(text):
        rest = text[at:]
        if closing:
            if rest.startswith(closing):
                out.append(closing)
                at, closing = at + len(closing), ""
            elif not final and closing.startswith(rest):
                return "".join(out), closing, rest
            else:
                out.append(text[at])
                at += 1
            continue
        if not final and rest in _UNDECIDED:
            return "".join(out), closing, rest
        if rest[0] == "\\":
            run = len(rest) - len(rest.lstrip("\\"))
            if run > 1:
                if not final and run == len(rest):
                    return "".join(out), closing, rest
                out.append(rest[:run])
                at += run
                continue
            if rest.startswith("\\r\\n"):
                out.append("\n")
                at += 4
                continue
            if rest.startswith(("\\n", "\\r")):
                out.append("\n")
                at += 2
                continue
        opener = next(((o, c) for o, c in _OPENERS if rest.startswith(o)), None)
        if opener is not None:
            out.append(opener[0])
            at, closing = at + len(opener[0]), opener[1]
            continue
        out.append(text[at])
        at += 1
    return "".join(out), closing, ""
