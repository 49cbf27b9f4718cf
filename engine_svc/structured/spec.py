"""A request's structured-output constraint as the engine keeps it: what to compile, and when it starts.

`Constraint` is what a grammar is compiled from (its `key` names the compiled grammar in the cache), with
the list its output is (`ItemList`: not part of the grammar, the guide's item budget reads it); `Gate` says
where in the output the constraint starts (after the reasoning); `Budget` caps the reasoning.
All are plain frozen data: they travel with a sequence to an engine core process.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from scaleout_common import structured_output_rules as rules
from scaleout_common.reasoning_ids import ReasoningIds
from scaleout_common.reasoning_ids import from_proto as reasoning_from_proto


@dataclass(frozen=True)
class ItemList:
    """The output is a list that may end after any whole item: `end` closes it, `separators` may go on."""

    end: bytes
    separators: bytes


@dataclass(frozen=True)
class Constraint:
    kind: str  # one of rules.KINDS
    text: str  # the schema / regex / grammar / structural tag; a choice's options as a JSON list
    any_whitespace: bool = True  # JSON: any whitespace between tokens (False: none)
    items: ItemList | None = field(default=None, compare=False)  # the guide's item budget (not compiled)
    key: str = field(init=False, compare=False)  # what the compiled grammar is cached under (with the tokenizer)

    def __post_init__(self) -> None:
        digest = hashlib.sha256(json.dumps([self.kind, self.text, self.any_whitespace]).encode()).hexdigest()
        object.__setattr__(self, "key", digest[:32])

    def describe(self) -> str:
        return f"{self.kind} constraint ({len(self.text)} bytes)"


@dataclass(frozen=True)
class Gate:
    """The constraint applies from the token after this reasoning ends."""

    reasoning: ReasoningIds
    started: bool  # the prompt opened the block


@dataclass(frozen=True)
class Budget:
    """Once the reasoning block holds `tokens` tokens, its end tag `force` is the only choice, id by id."""

    tokens: int
    gate: Gate
    force: tuple[int, ...]


def budget_from_proto(message) -> Budget:
    """A checked `ThinkingBudget` message -> what to enforce."""
    spec, started = reasoning_from_proto(message.reasoning)
    return Budget(message.max_tokens, Gate(spec, started), spec.end[0])


def from_proto(message) -> tuple[Constraint, Gate | None]:
    """A checked `StructuredOutputs` message (scaleout_common.structured_output_rules.check) -> what to enforce."""
    kind = rules.kind(message)
    assert kind is not None
    if kind == "choice":
        text = json.dumps(list(message.choice.values), ensure_ascii=False)
    elif kind == "json_object":
        text = ""
    else:
        text = getattr(message, kind)
    items = None
    if message.HasField("items"):
        items = ItemList(message.items.end.encode(), message.items.separators.encode())
    constraint = Constraint(kind, text, any_whitespace=not message.disable_any_whitespace, items=items)
    gate = None
    if message.HasField("reasoning") and not message.reasoning_ended:
        spec, started = reasoning_from_proto(message.reasoning)
        if spec.end or spec.ends_on:
            gate = Gate(spec, started)
    return constraint, gate
