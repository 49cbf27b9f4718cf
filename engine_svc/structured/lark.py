"""Lark grammars -> EBNF (GBNF), the form the grammar backend compiles, as vLLM converts them.

The subset vLLM accepts: rules `name: definition` with `|` alternatives (on the same or following lines),
quoted literals ('...' or "..."), rule references, grouping and the `?`, `*`, `+` operators; `start` (or the
first rule) is the root; `#` and `//` comments. Lark-only syntax outside it (terminals as /regex/, templates,
directives) is refused as an invalid grammar rather than guessed at.
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r"(#|//).*$")
_NAME = re.compile(r"\b[a-zA-Z_][a-zA-Z0-9_]*\b")


def is_lark(grammar: str) -> bool:
    """No `::=` rule anywhere (comments aside): the grammar is Lark, not EBNF."""
    return not any("::=" in _COMMENT.sub("", line) for line in grammar.splitlines())


def _clean(line: str) -> str:
    return _COMMENT.sub("", line).strip()


def _quotes_balanced(text: str) -> bool:
    return text.count("'") % 2 == 0 and text.count('"') % 2 == 0


def _references(text: str) -> set[str]:
    text = re.sub(r'"[^"]*"', "", text)
    text = re.sub(r"[+*?()|\[\]{}]", " ", text)
    return set(_NAME.findall(text))


def to_ebnf(grammar: str) -> str:
    """The EBNF form of a Lark grammar; ValueError names what does not convert."""
    lines = [_clean(line) for line in grammar.splitlines()]
    defined: list[str] = []
    for line in lines:
        if line and not line.startswith("|") and ":" in line:
            defined.append(line.split(":", 1)[0].strip().lstrip("?!"))
    if not defined:
        raise ValueError("no rule found (expected `name: definition` lines)")
    root = "start" if "start" in defined else defined[0]
    rules: list[tuple[str, list[str]]] = []
    referenced: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        if line.startswith("|"):
            if not rules:
                raise ValueError(f"line {number}: an alternative `|` before any rule")
            body = line[1:].strip()
            name = rules[-1][0]
        elif ":" in line:
            name, body = (part.strip() for part in line.split(":", 1))
            name = name.lstrip("?!")
            rules.append((name, []))
        else:
            raise ValueError(f"line {number}: expected `name: definition` or `| alternative`")
        if "/" in re.sub(r"\"[^\"]*\"|'[^']*'", "", body):
            raise ValueError(f"line {number}: regex terminals (/.../) are not supported")
        if not _quotes_balanced(body):
            raise ValueError(f"line {number}: mismatched quotes in rule {name!r}")
        body = re.sub(r"'([^']*)'", r'"\1"', body)
        referenced |= _references(body)
        rules[-1][1].extend(part.strip() for part in _split_alternatives(body))
    undefined = referenced - set(defined) - {"root"}
    if undefined:
        raise ValueError(f"undefined rules referenced: {', '.join(sorted(undefined))}")
    out = [f"root ::= {root}"] if root != "root" else []
    out += [f"{name} ::= {' | '.join(alternatives)}" for name, alternatives in rules]
    return "\n".join(out)


def _split_alternatives(body: str) -> list[str]:
    """Top-level `|` alternatives of a definition (not those inside quotes or parentheses)."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(body):
        if quote:
            if char == quote and body[i - 1] != "\\":
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return [p for p in parts if p.strip()]
