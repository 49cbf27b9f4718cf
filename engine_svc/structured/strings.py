"""String nodes as xgrammar 0.2.9 enforces them in full, found by the differential test: the formats it holds
as validators check them, patterns of ours for those it does not (its regexes admit 02-30, 019.1.1.1), and
the regex patterns it mis-compiles: inside a group that may be skipped (`?`, `*`, `{0,n}`), a sequence holding
a variable repetition loses elements (`x(yz{1,2})?` writes "xz", `^[a-z]{1,3}(-[a-z]{1,3})?$` writes
"abcdef"), lookarounds, backreferences and `\b` are ignored, and a literal backslash, quote or control
character is written unescaped (invalid JSON). Those are refused rather than under-enforced
(llguidance then takes the schema where it can: dual_backend.py).
"""

from __future__ import annotations

import math
import re

from engine_svc.structured.backend import GrammarError

try:  # the stdlib's regex parser (Python 3.11+ names it re._parser)
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

# String formats: those xgrammar enforces as validators check them, those held to a pattern of ours (xgrammar's
# regexes admit 02-30, 019.1.1.1, ::1.02.3.4, 80-character labels), and those validators check that neither can hold.
FORMATS = frozenset({"email", "duration", "uuid", "uri", "uri-reference", "json-pointer"})
_DATE = r"[1-9][0-9]{3}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)"
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9][0-9][0-9])?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
PATTERNS = {
    "date": f"^{_DATE}$",
    "time": f"^{_TIME}$",
    "date-time": f"^{_DATE}T{_TIME}$",
    "ipv4": rf"^{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}$",
    "hostname": r"^[a-z][a-z0-9]{0,30}$",
    "ipv6": r"^([0-9a-f]{1,4}:){7}[0-9a-f]{1,4}$",
    "regex": r"^[A-Za-z0-9 _-]*$",  # literal text: always a valid regex
}
# Formats held to one they contain: every URI is an IRI (reference), every email address an internationalized one.
NARROWER = {"iri": "uri", "iri-reference": "uri", "idn-email": "email", "idn-hostname": "hostname"}
CHECKED_FORMATS = FORMATS | set(PATTERNS) | {"idn-email", "idn-hostname", "iri", "iri-reference", "regex"}
CHECKED_FORMATS |= {"uri-template", "relative-json-pointer"}
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
# What xgrammar's regex compiler ignores (with a warning): lookarounds, backreferences, word boundaries.
_IGNORED = {"ASSERT", "ASSERT_NOT", "GROUPREF", "GROUPREF_EXISTS"}
_IGNORED_AT = {"AT_BOUNDARY", "AT_NON_BOUNDARY", "AT_UNI_BOUNDARY", "AT_UNI_NON_BOUNDARY", "AT_LOC_BOUNDARY"}


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
        if name in _IGNORED or (name == "AT" and str(arg) in _IGNORED_AT):
            return True
        if name == "LITERAL" and (arg in (0x22, 0x5C) or arg < 0x20):  # written raw: `\`, `"` unescaped in JSON
            return True
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


def string_node(alt: dict, path: str) -> dict | None:
    """A string node (its format, pattern, lengths) xgrammar enforces in full; None: no string satisfies it."""
    out: dict = {"type": "string"}
    fmt = alt.get("format")
    fmt = NARROWER.get(fmt, fmt) if isinstance(fmt, str) else fmt
    if fmt in CHECKED_FORMATS and fmt not in FORMATS and fmt not in PATTERNS:
        raise GrammarError(f"{path}: format {fmt!r} is checked by validators but not enforced by the backend")
    sized = "minLength" in alt or "maxLength" in alt
    if (fmt in FORMATS or fmt in PATTERNS) and ("pattern" in alt or sized):
        raise GrammarError(f"{path}: format {fmt!r} beside pattern/minLength/maxLength (the backend keeps one)")
    if "pattern" in alt and sized:
        raise GrammarError(f"{path}: minLength/maxLength beside pattern (bound the length in the pattern)")
    if fmt in PATTERNS:
        out["pattern"] = PATTERNS[fmt]
    elif fmt in FORMATS:
        out["format"] = fmt
    if "pattern" in alt and mis_compiled(alt["pattern"]):
        raise GrammarError(f"{path}: pattern {alt['pattern']!r} is one the backend mis-compiles ")
    if alt.get("minLength", 0) > alt.get("maxLength", math.inf):
        return None
    for key in ("pattern", "minLength", "maxLength"):
        if key in alt:
            out[key] = alt[key]
    return out


_OUTSIDE: dict[str, frozenset[str]] = {}  # each pattern `outside` wrote: the words it leaves out


def both_outside(a: str, b: str) -> str | None:
    """Two patterns of `outside` at once: the words of either left out (None: not two such patterns)."""
    return outside(sorted(_OUTSIDE[a] | _OUTSIDE[b])) if a in _OUTSIDE and b in _OUTSIDE else None


def outside(words: list[str]) -> str | None:
    """A pattern matching exactly the non-empty strings not in `words` (None: a word holds a character the
    backend writes raw, or too many words). Each alternative is a prefix the words share, then a character no
    word continues that prefix with (or any, past a word's end) and anything; or a proper prefix that is no word.
    Alternatives at the top level only, none skippable: nothing the backend mis-compiles."""
    if len(words) > 64 or any(c in '"\\' or c < " " for w in words for c in w):
        return None
    prefixes = {w[:i] for w in words for i in range(len(w) + 1)}
    parts = [re.escape(p) for p in sorted(prefixes - set(words) - {""})]
    for prefix in sorted(prefixes):
        following = sorted({w[len(prefix)] for w in words if w.startswith(prefix) and len(w) > len(prefix)})
        ruled_out = "".join("\\" + c if c in "]\\^-[" else c for c in following)
        parts.append(re.escape(prefix) + (f"[^{ruled_out}]" if ruled_out else ".") + ".*")
    pattern = f"^({'|'.join(parts)})$"
    _OUTSIDE[pattern] = frozenset(words)
    return pattern
