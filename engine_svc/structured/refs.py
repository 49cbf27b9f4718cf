"""The `$ref` graph of one schema: where each reference points, and which targets reach themselves (a target
that does cannot be inlined into a node: the lowering defines it once per set of siblings instead)."""

from __future__ import annotations

import contextlib
from typing import Any

import jsonschema
import referencing.exceptions

from engine_svc.structured import rewrite
from engine_svc.structured.backend import GrammarError


class Refs:
    def __init__(self, validator: jsonschema.Draft202012Validator):
        self.validator = validator
        self._targets: dict[int, list[Any]] = {}  # schema -> the targets of the $refs inside it
        self._cyclic: dict[int, bool] = {}

    def resolve(self, ref: str, path: str) -> Any:
        try:
            return self.validator._resolver.lookup(ref).contents
        except referencing.exceptions.Unresolvable:
            raise GrammarError(f"{path}: $ref {ref!r} does not resolve inside the schema") from None

    def cyclic(self, target: Any, path: str) -> bool:
        """`target` reaches a `$ref` back to itself (inlining it into a node would never end)."""
        if id(target) not in self._cyclic:
            seen, todo, found = set(), list(self._inside(target, path)), False
            while todo and not found:
                node = todo.pop()
                found = node is target
                if id(node) not in seen:
                    seen.add(id(node))
                    todo.extend(self._inside(node, path))
            self._cyclic[id(target)] = found
        return self._cyclic[id(target)]

    def _inside(self, schema: Any, path: str) -> list[Any]:
        if id(schema) not in self._targets:
            found: list[Any] = []

            def walk(node: Any) -> Any:
                if isinstance(node, dict):
                    if isinstance(node.get("$ref"), str):
                        with contextlib.suppress(GrammarError):  # refused where it is lowered, if it is
                            found.append(self.resolve(node["$ref"], path))
                    rewrite.subschemas(node, walk)
                return node

            walk(schema)
            self._targets[id(schema)] = found
        return self._targets[id(schema)]
