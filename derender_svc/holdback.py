"""Hold back text that might be the start of a marker (stop string, reasoning or tool tag) until it is decided."""

from __future__ import annotations


def partial_suffix_len(text: str, marker: str) -> int:
    """Length of the longest proper prefix of `marker` that `text` ends with."""
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if text.endswith(marker[:size]):
            return size
    return 0


def split_at_marker(text: str, marker: str) -> tuple[str, str | None, str]:
    """(before, marker or None, after). Without a full match, `after` is the held-back partial marker."""
    at = text.find(marker)
    if at >= 0:
        return text[:at], marker, text[at + len(marker) :]
    keep = partial_suffix_len(text, marker)
    return text[: len(text) - keep], None, text[len(text) - keep :]
