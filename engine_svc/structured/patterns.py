"""Regex patterns xgrammar 0.2.9 mis-compiles, found by the differential test: inside a group that may be
skipped (`?`, `*`, `{0,n}`), a sequence holding a variable repetition loses elements (`x(yz{1,2})?` writes
"xz", `^[a-z]{1,3}(-[a-z]{1,3})?$` writes "abcdef"). Such patterns are refused rather than under-enforced.
"""

from __future__ import annotations

try:  # the stdlib's regex parser (Python 3.11+ names it re._parser)
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


def _variable(items) -> bool:
    for op, arg in items:
        name = str(op)
        if name in _REPEATS and (arg[0] != arg[1] or _variable(arg[2])):
            return True
        if name == "SUBPATTERN" and _variable(arg[-1]):
            return True
        if name == "BRANCH" and any(_variable(branch) for branch in arg[1]):
            return True
    return False


def _bad(items, skippable: bool) -> bool:
    items = list(items)
    if skippable and len(items) > 1 and _variable(items):
        return True
    for op, arg in items:
        name = str(op)
        if name in _REPEATS and _bad(arg[2], skippable or arg[0] == 0):
            return True
        if name == "SUBPATTERN" and _bad(arg[-1], skippable):
            return True
        if name == "BRANCH" and any(_bad(branch, skippable) for branch in arg[1]):
            return True
    return False


def mis_compiled(pattern: str) -> bool:
    """True when xgrammar would enforce less than `pattern` says (or Python cannot parse it: refused too)."""
    try:
        parsed = sre_parse.parse(pattern)
    except Exception:
        return True
    return _bad(parsed, False)
