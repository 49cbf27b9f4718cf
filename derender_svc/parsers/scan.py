"""Finding markers in streamed text: the earliest match wins (the longest at one position), and text that may
still become a marker is held back, so a marker split over chunks is found exactly as in one piece."""

from __future__ import annotations


def _partial(text: str, markers: tuple[str, ...]) -> int:
    """Start of the longest suffix of `text` that is a proper prefix of some marker (len(text) when none)."""
    longest = max(len(m) for m in markers) - 1
    for start in range(max(0, len(text) - longest), len(text)):
        tail = text[start:]
        if any(m.startswith(tail) and m != tail for m in markers):
            return start
    return len(text)


def split_markers(text: str, markers: tuple[str, ...], final: bool) -> tuple[str, str | None, str]:
    """(before, marker or None, after). Without a match `after` is the held-back text that may still start
    a marker (nothing when `final`). A match that a longer marker at the same place could still extend is
    held back too, unless `final`."""
    best, found = -1, None
    for marker in markers:
        at = text.find(marker, 0, best + len(marker) if best >= 0 else len(text))
        if at >= 0 and (found is None or at < best or (at == best and len(marker) > len(found))):
            best, found = at, marker
    if found is not None:
        rest = text[best:]
        if not final and any(len(m) > len(found) and m.startswith(rest) and m != rest for m in markers):
            return text[:best], None, rest
        return text[:best], found, text[best + len(found) :]
    if final:
        return text, None, ""
    keep = _partial(text, markers)
    return text[:keep], None, text[keep:]


def opening(text: str, markers: tuple[str, ...], final: bool) -> tuple[str | None, bool]:
    """Does `text`, after leading whitespace, start with one of `markers`? (marker or None, decided)."""
    rest = text.lstrip()
    for marker in sorted(markers, key=len, reverse=True):
        if rest.startswith(marker):
            longer = any(len(m) > len(marker) and m.startswith(rest) and m != rest for m in markers)
            if not (longer and not final):
                return marker, True
            return None, False
    if not final and (not rest or any(m.startswith(rest) for m in markers)):
        return None, False
    return None, True


def drop_tags(text: str, tags: tuple[str, ...], final: bool) -> tuple[str, str]:
    """(`text` without `tags`, the held-back tail that may still become one; nothing when `final`)."""
    out: list[str] = []
    while True:
        before, tag, text = split_markers(text, tags, final)
        out.append(before)
        if tag is None:
            return "".join(out), text
