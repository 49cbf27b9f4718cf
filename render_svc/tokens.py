"""Tokenization through the fast tokenizer's Rust core: batch calls that release the GIL, ids without offsets
unless asked. Equal to `tokenizer(text, add_special_tokens=...)` (what apply_chat_template(tokenize=True) runs).

`encode_cut` tokenizes a prompt in pieces: the tokenizer splits a text at its added tokens before anything else
(matched on the raw text, leftmost-longest) and normalizes, pre-tokenizes and models each piece on its own
(tokenizers' `AddedVocabulary::extract_and_normalize`), so cutting a text where it cuts gives the whole text's
ids. That buys two things from the one tokenization:
- how many tokens lie before a position where an added token starts (render's routing key needs the token
  count of a chat's first turn), without tracking offsets;
- long pieces' ids kept in a PieceCache (render_svc/piece_cache.py) once `use_cache` is on: a conversation's
  history is tokenized once, not on every turn.
The cut points are found as the tokenizer finds them: a regex of the raw-matched added tokens, longest first.
Pieces are cut only where that is exact: the tokenizer splits on special tokens, no raw-matched added token takes
whitespace around it (`lstrip`/`rstrip`) or needs word boundaries (`single_word`), no special tokens are added
around each piece (`add_special_tokens=False`), and no part of its pipeline depends on where a piece starts in
the text (Metaspace's `prepend_scheme: first` does). Elsewhere the count comes from the whole text's offsets.
"""

from __future__ import annotations

import itertools
import json
import re

from render_svc.fast_bpe import FastBpe, fast_bpe
from render_svc.piece_cache import PieceCache

# Pieces at least this long are cached on their own; shorter ones are tokenized with their neighbours each time.
MIN_CACHED_CHARS = 512


def _position_dependent(component) -> bool:
    """Whether a normalizer / pre-tokenizer (tokenizer.json) treats the piece at the start of the text apart."""
    if isinstance(component, list):
        return any(_position_dependent(c) for c in component)
    if not isinstance(component, dict):
        return False
    if component.get("type") == "Metaspace" and component.get("prepend_scheme") == "first":
        return True
    return any(_position_dependent(v) for v in component.values() if isinstance(v, (dict, list)))


def _splitter(rust) -> re.Pattern | None:
    """The raw-matched added tokens as a leftmost-longest regex, where cutting at them is exact (else None)."""
    if rust.encode_special_tokens:
        return None
    pipeline = json.loads(rust.to_str())
    if _position_dependent([pipeline.get("normalizer"), pipeline.get("pre_tokenizer")]):
        return None
    raw = [t for t in rust.get_added_tokens_decoder().values() if not t.normalized and t.content]
    if not raw or any(t.lstrip or t.rstrip or t.single_word for t in raw):
        return None
    return re.compile("|".join(re.escape(t.content) for t in sorted(raw, key=lambda t: -len(t.content))))


class Tokens:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.vocab_size = len(tokenizer)
        self._rust = getattr(tokenizer, "_tokenizer", None)
        self._splitter: re.Pattern | None = None
        self._fast: FastBpe | None = None
        self.cache: PieceCache | None = None
        if self._rust is not None:
            # The Python wrapper sets these per call; direct calls must see the same (no truncation or padding).
            self._rust.no_truncation()
            self._rust.no_padding()
            self._rust.encode_special_tokens = bool(getattr(tokenizer, "split_special_tokens", False))
            self._splitter = _splitter(self._rust)
            self._fast = fast_bpe(self._rust, self._splitter)

    def use_cache(self, budget_mb: int) -> None:
        """Keep long pieces' ids (up to `budget_mb`); 0 keeps none."""
        self.cache = PieceCache(budget_mb * 1024 * 1024) if budget_mb > 0 and self._splitter else None

    def encode(self, texts: list[str], add_special_tokens: bool) -> list[list[int]]:
        if self._rust is not None:
            return [e.ids for e in self._rust.encode_batch_fast(texts, add_special_tokens=add_special_tokens)]
        return self.tokenizer(texts, add_special_tokens=add_special_tokens)["input_ids"]

    def encode_with_offsets(
        self, texts: list[str], add_special_tokens: bool
    ) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """Ids and each token's [start, end) character span in its text."""
        if self._rust is not None:
            return [(e.ids, e.offsets) for e in self._rust.encode_batch(texts, add_special_tokens=add_special_tokens)]
        out = self.tokenizer(texts, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
        return list(zip(out["input_ids"], out["offset_mapping"]))

    def encode_cut(
        self, texts: list[str], cuts: list[int | None], add_special_tokens: bool, offsets: bool
    ) -> list[tuple[list[int], list | None, int | None]]:
        """(ids, offsets when asked, the number of tokens that end at or before `cut`) of every text, from one
        tokenization of each (cached pieces' ids taken as they are); the count is None where the cut is None or
        the tokenizer has no offsets."""
        if self._rust is None:
            if offsets:
                return [(ids, spans, None) for ids, spans in self.encode_with_offsets(texts, add_special_tokens)]
            return [(ids, None, None) for ids in self.encode(texts, add_special_tokens)]
        piecewise = self._splitter is not None and not offsets and not add_special_tokens
        plans = [self._pieces(text, cut) if piecewise else None for text, cut in zip(texts, cuts)]
        ids_of = self._encode_pieces([plan[0] for plan in plans if plan is not None])
        tracked = [text for text, plan in zip(texts, plans) if plan is None]
        encodings = iter(self._rust.encode_batch(tracked, add_special_tokens=add_special_tokens) if tracked else ())
        out = []
        for cut, plan in zip(cuts, plans):
            if plan is not None:
                pieces, head = plan
                parts = [ids_of[id(piece)] for piece in pieces]
                ids = list(parts[0]) if parts else []
                for part in parts[1:]:
                    ids.extend(part)
                out.append((ids, None, None if head is None else sum(len(part) for part in parts[:head])))
            else:
                encoding = next(encodings)
                count = None if cut is None else _tokens_before(encoding, cut)
                out.append((encoding.ids, encoding.offsets if offsets else None, count))
        return out

    def hard_boundary(self, text: str, at: int) -> bool:
        """Whether `text` may be tokenized as text[:at] and text[at:] with the whole text's ids."""
        return self._splitter is not None and self._pieces(text, at) is not None

    def _pieces(self, text: str, cut: int | None) -> tuple[list[str], int | None] | None:
        """`text` cut where the tokenizer cuts it: long runs between two added tokens alone (the cache's), the
        rest joined, and a cut at `cut`; with the index of the first piece after `cut`. None when `cut` is not
        where an added token starts (or is 0)."""
        assert self._splitter is not None  # callers check it
        points, starts = [0], set()
        for match in self._splitter.finditer(text):
            starts.add(match.start())
            points += match.span()
        if cut is not None and (cut not in starts or cut <= 0):
            return None
        points.append(len(text))
        longest = MIN_CACHED_CHARS if self.cache is not None else len(text) + 1
        pieces, head, glue = [], None, 0
        for start, end in itertools.pairwise(points):
            if start == cut and head is None:
                pieces += [text[glue:start]] if start > glue else []
                head, glue = len(pieces), start
            if end - start >= longest:
                pieces += [text[glue:start]] if start > glue else []
                pieces.append(text[start:end])
                glue = end
        pieces += [text[glue:]] if glue < len(text) else []
        return pieces, head

    def _encode_pieces(self, plans: list[list[str]]) -> dict[int, list[int]]:
        """Ids of every piece (by id()): long ones from the cache, the rest in one batch call (then cached)."""
        out, todo = {}, []
        cache = self.cache
        for pieces in plans:
            for piece in pieces:
                known = cache.get(piece) if cache is not None and len(piece) >= MIN_CACHED_CHARS else None
                if known is None:
                    todo.append(piece)
                else:
                    out[id(piece)] = known
        if self._fast is not None:  # byte-level BPE through tiktoken's core, where its ids are the same
            fast = [(piece, self._fast.encode(piece)) for piece in todo]
            todo = [piece for piece, ids in fast if ids is None]
            encoded = [(piece, ids) for piece, ids in fast if ids is not None]
        else:
            encoded = []
        if todo:
            assert self._rust is not None  # pieces come from a fast tokenizer only
            encodings = self._rust.encode_batch_fast(todo, add_special_tokens=False)
            encoded += [(piece, encoding.ids) for piece, encoding in zip(todo, encodings)]
        for piece, ids in encoded:
            out[id(piece)] = ids
            if cache is not None and len(piece) >= MIN_CACHED_CHARS:
                cache.put(piece, ids)
        return out

    def decode(self, ids, skip_special_tokens: bool) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_strs(self, ids) -> list[str]:
        return self.tokenizer.convert_ids_to_tokens(list(ids))


def _tokens_before(encoding, at: int) -> int:
    """How many of `encoding`'s tokens end at or before character `at` of its text."""
    if at <= 0:
        return sum(1 for start, end in encoding.offsets if end <= 0)
    index = encoding.char_to_token(at - 1)
    if index is None:  # a character no token covers (stripped): count by the spans
        return sum(1 for start, end in encoding.offsets if end <= at)
    return index + 1 if encoding.token_to_chars(index)[1] <= at else index
