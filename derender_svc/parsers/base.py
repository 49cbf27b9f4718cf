"""What parsers emit, and the state convention they share: a parser is rebuilt from its own `state()`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ToolCallDelta:
    """A piece of one tool call: the first piece names the function, later ones extend its arguments."""

    index: int  # position of the call within the message
    name: str | None = None
    arguments: str = ""


class StatefulParser:
    """Streaming parser whose whole state is the keyword arguments of its constructor (JSON-able)."""

    #: tags the parser looks for; kept in the text even when they are special tokens and specials are skipped
    markers: tuple[str, ...] = ()
    #: the model's data (its TokenizerInfo), for formats the model declares (response_template.py); not state
    model: Any = None

    def __init__(self, **state):
        self.__dict__.update(self.initial_state())
        self.__dict__.update(state)

    @classmethod
    def initial_state(cls) -> dict:
        raise NotImplementedError

    def state(self) -> dict:
        return {k: getattr(self, k) for k in self.initial_state()}
