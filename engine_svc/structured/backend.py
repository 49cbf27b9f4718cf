"""What the engine needs from a grammar library: compile a constraint for one tokenizer, follow an output with a
matcher, and turn the matcher's state into a token mask on the logits.

`XGrammarBackend` (xgrammar_backend.py) implements it; `DualBackend` (dual_backend.py, the engine's default)
adds llguidance's compile and matchers (llguidance_backend.py) for the JSON schemas xgrammar cannot enforce. Masks are bitmasks: int32 words, bit j of row r set when token 32*w+j is
allowed, filled on the host and applied to the logits on their device.
"""

from __future__ import annotations

from typing import Protocol

import torch

from engine_svc.structured.spec import Constraint


class GrammarError(ValueError):
    """The constraint is malformed or asks for what the backend cannot enforce (INVALID_GRAMMAR)."""


class CompiledGrammar(Protocol):
    @property
    def memory_size_bytes(self) -> int: ...


class Matcher(Protocol):
    """One output's position in its grammar."""

    def accept(self, token: int) -> bool:
        """Advance by `token`; False (and no change) when the grammar does not allow it."""
        ...

    def fill(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the tokens allowed next into row `row` of a host bitmask."""
        ...

    def is_terminated(self) -> bool:
        """The grammar is complete and took its stop token (or needs none): nothing more may follow."""
        ...

    def fork(self) -> Matcher:
        """An independent copy at this position (to try text on without moving this one)."""
        ...

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by text, whatever its tokens; False when the grammar does not allow it (then drop the matcher:
        only forks are fed text)."""
        ...

    def is_completed(self) -> bool:
        """The output so far is complete: the grammar may end here (a stop token may follow)."""
        ...


class GrammarBackend(Protocol):
    name: str
    vocab_size: int  # the model's logits width (ids past the tokenizer's are never allowed)

    def compile(self, constraint: Constraint) -> CompiledGrammar:
        """Raises GrammarError for a bad constraint. May take long: call it off the step loop."""
        ...

    def matcher(self, grammar: CompiledGrammar, stop_token_ids: frozenset[int]) -> Matcher:
        """A matcher at the start of `grammar`; it ends with one of `stop_token_ids` (or by itself when empty)."""
        ...

    def token_bytes(self) -> list[bytes]:
        """Each token id's text as bytes (the tokenizer's ids the masks cover)."""
        ...

    def fill_rows(self, matchers: list[Matcher], bitmask: torch.Tensor, rows: list[int]) -> None:
        """Each matcher's next allowed tokens into its row of a host bitmask."""
        ...

    def allocate_bitmask(self, rows: int, pin: bool) -> torch.Tensor: ...

    def apply_bitmask(self, logits: torch.Tensor, bitmask: torch.Tensor, rows: list[int]) -> None:
        """Set the disallowed logits of `rows` to -inf, in place (`bitmask` on the logits' device), the columns
        past the tokenizer's vocabulary included."""
        ...

    def warm_up(self, device: torch.device) -> None:
        """Run a mask on `device` before serving (kernels compile here, not in the first constrained step)."""
        ...
