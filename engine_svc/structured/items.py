"""The item budget: a list that may end after any whole item opens no item the tokens left cannot hold.

A forced tool choice with parallel calls is a JSON array of calls that may end after any whole call (render sets
`StructuredOutputs.items`: end "]", separators ","). A weak model at temperature 1 opens another call with too
few tokens left, and the length cut leaves it open: the answer ends `length` although every call it needed was
whole (issue 38: 6 of 20 forced calls on the default model at max_tokens 64). So a guided output with `items`:
- an end point is where the grammar is complete once `end` follows (a fork of the matcher takes `end`); an item
  is what the output wrote from the previous end point (or from where the constraint starts) to this one, in
  tokens: a call with its separator, or the first with the list's opening;
- at an end point the list goes on only while the tokens left (max_tokens less the output's tokens) hold an item
  as long as the longest this output wrote, the end and a stop token; else only the end may follow;
- a token may pass an end point inside it and go on (`},` closes a call and writes the separator; the default
  model's tokenizer writes `"}}, {"` as `"}`, `},`, ` {"`): a token with a separator character past its first
  byte is tried at each such byte, and is not allowed where the list could end there and the tokens left after
  it are short by the same measure (the item it closes counted): the output then closes the item alone and
  meets the end point.
What is written is never cut or changed: the rule only declines to open another item. The first item is the
grammar's own (it is not an estimate's to refuse). The longest item written is the estimate of the next: a
second call takes about what the first did (30-57 tokens on the default model), where the smallest call the
schemas admit (23 tokens) would still open calls that a 64-token budget cannot finish.

A list with no `end` (strict tools' `<tool_call>` tags under tool_choice auto, free text around them; separators
"<"; or calls joined by "\n") ends with the output's stop token, and the output may stop anywhere in its free
text. There an item is what runs from the token that leaves the points where the output may stop (from the
token holding the separator that began it, at such a point: the `<` of `<tool_call>`) to the token that meets
one again; at a point where the output may stop, with fewer tokens left than the longest item and a stop token,
no token holding a separator may follow: the text may go on or stop, no item opens.
"""

from __future__ import annotations

import torch

from engine_svc.structured.backend import Matcher
from engine_svc.structured.guide import allow, disallow
from engine_svc.structured.spec import ItemList


def _may_stop(matcher: Matcher) -> bool:
    """The output may end here with a stop token (a list with no end: an end point)."""
    return not matcher.is_terminated() and matcher.is_completed()


def _allowed(bitmask: torch.Tensor, row: int, token: int) -> bool:
    word, bit = divmod(token, 32)
    return bool((int(bitmask[row, word]) >> bit) & 1)


class ItemVocab:
    """The vocabulary as the rule reads it for one `ItemList` (built once per list and tokenizer)."""

    def __init__(self, texts: list[bytes], items: ItemList):
        self.texts, self.end = texts, items.end
        # tokens that write the end or start it; the tokens the end takes at the fewest (greedy over those)
        self.ending = [i for i, text in enumerate(texts) if text and items.end.startswith(text)]
        self.end_tokens, rest = 0, items.end
        while rest:  # (bytes no token starts count as one token)
            rest = rest[max((len(texts[i]) for i in self.ending if rest.startswith(texts[i])), default=len(rest)) :]
            self.end_tokens += 1
        # token -> the byte offsets of its separator characters past the first byte
        self.inner = {
            i: positions
            for i, text in enumerate(texts)
            if (positions := tuple(p for p in range(1, len(text)) if text[p] in items.separators))
        }
        ids = torch.tensor(sorted(self.inner), dtype=torch.int64)
        self.inner_ids, self.inner_words, self.inner_bits = ids, ids // 32, (ids % 32).to(torch.int32)
        # a list with no end: the tokens holding a separator, and a bitmask row that clears them (`hold`)
        self.holding: frozenset[int] = frozenset()
        if not items.end:
            self.holding = frozenset(i for i, text in enumerate(texts) if any(b in items.separators for b in text))
            held = torch.tensor(sorted(self.holding), dtype=torch.int64)
            words = torch.zeros((len(texts) + 31) // 32, dtype=torch.int64)
            words.index_add_(0, held // 32, torch.ones_like(held) << (held % 32))
            self.keep = ~(words - ((words >> 31) << 32)).to(torch.int32)  # (int32 words: bit 31 is the sign)

    def allowed_inner(self, bitmask: torch.Tensor, row: int) -> list[int]:
        """The tokens with an inner separator that a filled bitmask row allows (one gather, not ~100 reads)."""
        bits = (bitmask[row][self.inner_words] >> self.inner_bits) & 1
        return self.inner_ids[bits.bool()].tolist()

    def hold(self, bitmask: torch.Tensor, row: int) -> None:
        """Clear the tokens holding a separator from a filled bitmask row (a list with no end)."""
        bitmask[row, : self.keep.numel()] &= self.keep


class ItemBudget:
    """One output's item budget: the tokens left, where the item under way started, the longest item."""

    __slots__ = ("at_end", "left", "longest", "opening", "passed", "start", "stops", "vocab")

    def __init__(self, vocab: ItemVocab, max_tokens: int, stops: frozenset[int]):
        self.vocab = vocab
        self.stops = sorted(stops)  # the output's stop tokens (a special token's text may hold a separator: "</s>")
        self.left = max_tokens  # tokens the output may still take
        self.start: int | None = None  # `left` where the item under way started (None: the list has not)
        self.longest: int | None = None  # tokens of the longest whole item
        self.at_end = False  # the output is at an end point
        self.passed = False  # the token being accepted passes an end point inside it
        self.opening: int | None = None  # no end: `left` before the last token holding a separator at an end point

    def _ends_after(self, matcher: Matcher, prefix: bytes) -> bool:
        fork = matcher.fork()
        return fork.accept_bytes(prefix + self.vocab.end) and fork.is_completed()

    def _passes(self, matcher: Matcher, token: int) -> bool:
        text = self.vocab.texts[token]
        return any(self._ends_after(matcher, text[:p]) for p in self.vocab.inner.get(token, ()))

    def spend(self) -> None:
        """Every token of the output, reasoning included (max_tokens counts them all)."""
        self.left -= 1

    def before(self, matcher: Matcher, token: int) -> None:
        """A content token, before the matcher takes it (and before `spend`)."""
        if self.vocab.end:
            if self.start is None:
                self.start = self.left
            self.passed = token in self.vocab.inner and self._passes(matcher, token)
            return
        self.at_end = _may_stop(matcher)
        if self.at_end and token in self.vocab.holding:
            self.opening = self.left
        self.passed = self.start is not None and token in self.vocab.inner and self._passes(matcher, token)

    def after(self, matcher: Matcher) -> None:
        """The matcher took the token (and `spend` counted it): close the item that ended in or with it, or (no
        end) open the item it began."""
        if self.passed:
            self._whole()
        if self.vocab.end:
            self.at_end = not matcher.is_terminated() and self._ends_after(matcher, b"")
            if self.at_end:
                self._whole()
            return
        self.at_end = _may_stop(matcher)
        if self.at_end:
            if self.passed:  # (the text after the separator it holds is free text)
                self.opening = self.left + 1
            elif self.start is not None:
                self._whole()
            self.start = None
        elif self.start is None:  # the item opened with this token, or with the separator that began it
            self.start = self.left + 1 if self.opening is None else self.opening
            self.opening = None

    def _whole(self) -> None:
        assert self.start is not None
        length = self.start - self.left
        if length > 0:
            self.longest = max(self.longest or 0, length)
            self.start = self.left

    def restrict(self, matcher: Matcher, bitmask: torch.Tensor, row: int) -> None:
        """After the matcher filled the row: at an end point with too few tokens left for another item as long as
        the longest, the end and a stop token, only the end (no end: no token holding a separator; the stop tokens
        stay); elsewhere, no token that passes an end point when the tokens left after it are as short, counting
        the item it closes (the first item closes so)."""
        reserve = self.vocab.end_tokens + 1
        if self.at_end:
            if self.left < (self.longest or 0) + reserve:
                if not self.vocab.end:
                    stops = [i for i in self.stops if _allowed(bitmask, row, i)]
                    self.vocab.hold(bitmask, row)
                    allow(bitmask, row, stops)
                    return
                ending = [i for i in self.vocab.ending if _allowed(bitmask, row, i)]
                if ending:
                    bitmask[row].zero_()
                    allow(bitmask, row, ending)
            return
        if self.start is None:
            return
        closing = max(self.longest or 0, self.start - self.left + 1)  # the item a passing token would close
        if self.left - 1 >= closing + reserve:
            return
        for token in self.vocab.allowed_inner(bitmask, row):
            if self._passes(matcher, token):
                disallow(bitmask, row, [token])
