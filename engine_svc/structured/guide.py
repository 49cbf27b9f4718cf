"""Per-sequence grammar state (`Guide`) and the per-step token masks (`Masker`).

A guided sequence's next token must keep its output inside the grammar. Each step that samples guided rows:
1. before the forward pass, `Masker.fill` hands the rows' matchers to a worker thread, which writes each
   row's allowed tokens into a host bitmask while the model runs (native code; it holds the GIL, so this
   pays beside a forward pass that releases it); in a decode run, where the device computes step k while
   the host feeds step k-1's tokens to the guides, the step thread fills them itself;
2. after the forward pass, `MaskJob.apply` copies the bitmask to the logits' device and sets every
   disallowed logit of those rows to -inf, before any sampling;
3. once the tokens are on the host, each guide accepts its row's token.
Rows of unguided sequences are never touched. A guide whose constraint starts after the reasoning passes
its tokens to a `ReasoningWatch` until the reasoning ends, then feeds the content ids after the end tag to
its matcher: until then its rows are not masked. When the output may or may not open a reasoning block, its
first token is the grammar's or the first id of a start tag: either way the output stays valid. A thinking
budget (`Budget`) counts the block's tokens; once they reach it, the rows allow only the end tag's next id
until the tag is out. A guide may have a budget and no matcher: then only the forced ids are ever masked.
A guide whose output is a list of items (`ItemBudget`, items.py) also narrows its content rows so that no item
opens that the tokens left cannot hold.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import torch

from engine_svc.structured.backend import GrammarBackend, Matcher
from engine_svc.structured.spec import Budget, Gate
from scaleout_common.reasoning_ids import ReasoningWatch

if TYPE_CHECKING:
    from engine_svc.structured.items import ItemBudget

CONTENT, REASONING, UNDECIDED, OPENING = range(4)  # a guide's modes


def allow(bitmask: torch.Tensor, row: int, ids) -> None:
    """Set the bits of `ids` in a host bitmask row (int32 words, bit j of word w: token 32*w + j)."""
    words = bitmask[row]
    for token in ids:
        word, bit = divmod(token, 32)
        value = (int(words[word]) & 0xFFFFFFFF) | (1 << bit)
        words[word] = value - (1 << 32) if value >= 1 << 31 else value


def disallow(bitmask: torch.Tensor, row: int, ids) -> None:
    """Clear the bits of `ids` in a host bitmask row."""
    words = bitmask[row]
    for token in ids:
        word, bit = divmod(token, 32)
        value = int(words[word]) & 0xFFFFFFFF & ~(1 << bit)
        words[word] = value - (1 << 32) if value >= 1 << 31 else value


class Guide:
    """One constrained sequence: its matcher (None: a thinking budget alone), where the constraint starts,
    and the budget.

    Modes: CONTENT (the grammar applies), REASONING (free until the reasoning ends; a `ReasoningWatch`
    decides), UNDECIDED (the first token: the grammar's tokens or the first id of a start tag, which opens
    the reasoning), OPENING (inside a start tag of several ids: only its next id)."""

    __slots__ = ("budget", "forcing", "gate", "items", "matcher", "mode", "opening", "rejected", "watch")

    def __init__(
        self,
        matcher: Matcher | None,
        gate: Gate | None = None,
        budget: Budget | None = None,
        items: ItemBudget | None = None,
    ):
        if gate is None and budget is not None and matcher is None:  # (a grammar from the first token: no block)
            gate = budget.gate
        self.matcher, self.gate, self.budget, self.items = matcher, gate, budget, items
        self.watch: ReasoningWatch | None = None
        self.opening: list[int] = []  # start-tag ids so far (UNDECIDED / OPENING)
        self.forcing: list[int] = []  # the end tag's ids still to come, once the budget is spent
        self.rejected = False  # a token the grammar did not allow got through (no token was allowed)
        if gate is None:
            self.mode = CONTENT
        elif gate.started or gate.reasoning.forced or matcher is None:  # no grammar: the watch tells openings
            self._reason(ReasoningWatch(gate.reasoning, gate.started))
        else:
            self.mode = UNDECIDED if gate.reasoning.start else CONTENT

    def _reason(self, watch: ReasoningWatch) -> None:
        self.mode, self.watch = REASONING, watch
        self._spend()

    def _spend(self) -> None:
        """Start forcing the end tag once the block holds the budget's tokens (once: the budget is then gone)."""
        assert self.watch is not None
        reasoned = self.watch.reasoned
        if self.budget is not None and reasoned is not None and reasoned >= self.budget.tokens:
            self.forcing, self.budget = list(self.budget.force), None

    @property
    def masked(self) -> bool:
        return bool(self.forcing) or (self.mode != REASONING and self.matcher is not None)

    @property
    def matched(self) -> bool:
        """The matcher fills this row's mask (the grammar's tokens; UNDECIDED adds the start tags' after)."""
        return self.mode in (CONTENT, UNDECIDED) and self.matcher is not None

    def adjust(self, bitmask: torch.Tensor, row: int) -> None:
        """After the matcher filled the row (or not): the start tags' first ids (UNDECIDED), only the next id
        of the start tag under way (OPENING), or of the end tag a spent budget forces."""
        if self.forcing:
            bitmask[row].zero_()
            allow(bitmask, row, self.forcing[:1])
            return
        if self.mode == CONTENT:
            if self.items is not None and self.matcher is not None:
                self.items.restrict(self.matcher, bitmask, row)
            return
        assert self.gate is not None
        starts = self.gate.reasoning.start
        if self.mode == UNDECIDED:
            allow(bitmask, row, {seq[0] for seq in starts})
            return
        prefix = tuple(self.opening)
        bitmask[row].zero_()
        allow(bitmask, row, {s[len(prefix)] for s in starts if len(s) > len(prefix) and s[: len(prefix)] == prefix})

    def accept(self, token: int) -> None:
        items = self.items
        if self.mode == CONTENT:
            if self.matcher is not None and items is not None:
                items.before(self.matcher, token)
                items.spend()
                self.rejected |= not self.matcher.accept(token)
                items.after(self.matcher)
            elif self.matcher is not None:
                self.rejected |= not self.matcher.accept(token)
            return
        if items is not None:
            items.spend()
        if self.mode in (UNDECIDED, OPENING):
            assert self.gate is not None
            prefix = (*self.opening, token)
            starts = self.gate.reasoning.start
            if any(s[: len(prefix)] == prefix for s in starts):
                self.opening = list(prefix)
                self.mode = OPENING
                if prefix in starts:  # the block is open: the watch takes it from here
                    watch = ReasoningWatch(self.gate.reasoning, False)
                    for t in prefix:
                        watch.feed(t)
                    self._reason(watch)
                return
            self.mode = CONTENT  # no start tag: the whole output is the answer
            assert self.matcher is not None  # (UNDECIDED is a grammar's mode)
            for t in prefix:
                self.rejected |= not self.matcher.accept(t)
            return
        assert self.watch is not None
        content = self.watch.feed(token)
        if self.forcing:
            self.forcing.pop(0)
        if content is None:
            self._spend()
            return
        self.mode, self.forcing = CONTENT, []
        if self.matcher is not None:
            for t in content:
                self.rejected |= not self.matcher.accept(t)

    @property
    def done(self) -> bool:
        """Nothing more may follow: the grammar is complete and closed, or it was broken."""
        return self.rejected or (self.mode == CONTENT and self.matcher is not None and self.matcher.is_terminated())


class MaskJob:
    """One step's bitmask, filled on the worker thread: `apply` waits for it and masks the logits."""

    def __init__(self, masker: Masker, bitmask: torch.Tensor, rows: list[int], filled: Future):
        self.masker, self.bitmask, self.rows, self._filled = masker, bitmask, rows, filled

    def apply(self, logits: torch.Tensor) -> None:
        self._filled.result()
        bitmask = self.bitmask[: max(self.rows) + 1]
        if logits.device != bitmask.device:
            bitmask = bitmask.to(logits.device, non_blocking=True)
        self.masker.backend.apply_bitmask(logits, bitmask, self.rows)


class Masker:
    """Host bitmasks (two, used in turn, so one can still be copying to the device while the other fills)
    and the worker thread that fills them."""

    def __init__(self, backend: GrammarBackend, device: torch.device, rows: int = 16):
        self.backend = backend
        self.device = device
        self._pin = device.type == "cuda"
        self._buffers = [backend.allocate_bitmask(rows, self._pin) for _ in range(2)]
        self._turn = 0
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="grammar-mask")

    def fill(self, guided: list[tuple[int, Guide]], now: bool = False) -> MaskJob:
        """Start filling the bitmask rows of `guided` ((logits row, guide) pairs) on the worker thread, or fill
        them `now` on this one (the matchers hold the GIL: a worker only helps beside a forward pass that
        releases it)."""
        need = max(row for row, _ in guided) + 1
        self._turn ^= 1
        if self._buffers[self._turn].shape[0] < need:
            self._buffers[self._turn] = self.backend.allocate_bitmask(
                max(need, 2 * self._buffers[self._turn].shape[0]), self._pin
            )
        bitmask = self._buffers[self._turn]
        matched = [(row, matcher) for row, guide in guided if guide.matched and (matcher := guide.matcher) is not None]
        others = [(row, guide) for row, guide in guided if guide.mode != CONTENT or guide.items is not None]

        def fill() -> None:
            if matched:
                self.backend.fill_rows([m for _, m in matched], bitmask, [row for row, _ in matched])
            for row, guide in others:
                guide.adjust(bitmask, row)

        rows = [row for row, _ in guided]
        if now:
            filled: Future = Future()
            fill()
            filled.set_result(None)
            return MaskJob(self, bitmask, rows, filled)
        return MaskJob(self, bitmask, rows, self._worker.submit(fill))

    def close(self) -> None:
        self._worker.shutdown(wait=False)
