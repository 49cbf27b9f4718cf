"""Tokenization through the fast tokenizer's Rust core: batch calls that release the GIL, ids without offsets
unless asked. Equal to `tokenizer(text, add_special_tokens=...)` (what apply_chat_template(tokenize=True) runs).

`encode_cut` also says how many of a text's tokens lie before a character position (render's routing key needs
the token count of a chat's first turn) from that one tokenization. Where the text right after the position
starts with a hard boundary, the text is encoded as its two pieces in one batch call, without offsets (cheaper
than tracking them, and the pieces run in parallel): the tokenizer splits a text at its added tokens before
anything else and normalizes, pre-tokenizes and models each piece on its own (tokenizers'
`AddedVocabulary::extract_and_normalize`), so the pieces' ids are the whole text's. A boundary is hard when an
added token matched on the raw text (`normalized=False`) that takes no whitespace before it (`lstrip`) nor
needs word boundaries (`single_word`) starts there and no added token spans the position, the tokenizer splits
on special tokens, no special tokens are added around each piece (`add_special_tokens=False`) and no part of
its pipeline depends on where a piece starts in the text (Metaspace's `prepend_scheme: first` does). Elsewhere
the count comes from the whole text's offsets.
"""

from __future__ import annotations

import json


def _position_dependent(component) -> bool:
    """Whether a normalizer / pre-tokenizer (tokenizer.json) treats the piece at the start of the text apart."""
    if isinstance(component, list):
        return any(_position_dependent(c) for c in component)
    if not isinstance(component, dict):
        return False
    if component.get("type") == "Metaspace" and component.get("prepend_scheme") == "first":
        return True
    return any(_position_dependent(v) for v in component.values() if isinstance(v, (dict, list)))


class Tokens:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.vocab_size = len(tokenizer)
        self._rust = getattr(tokenizer, "_tokenizer", None)
        self._hard: tuple[str, ...] = ()  # added tokens a text may be cut before (see the module's docstring)
        self._added: tuple[str, ...] = ()  # every added token (none may span a cut)
        if self._rust is not None:
            # The Python wrapper sets these per call; direct calls must see the same (no truncation or padding).
            self._rust.no_truncation()
            self._rust.no_padding()
            self._rust.encode_special_tokens = bool(getattr(tokenizer, "split_special_tokens", False))
            pipeline = json.loads(self._rust.to_str())
            tokens = self._rust.get_added_tokens_decoder().values()
            self._added = tuple(t.content for t in tokens if len(t.content) > 1)
            if not self._rust.encode_special_tokens and not _position_dependent(
                [pipeline.get("normalizer"), pipeline.get("pre_tokenizer")]
            ):
                self._hard = tuple(
                    t.content for t in tokens if not (t.normalized or t.lstrip or t.single_word) and t.content
                )

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
        tokenization of each; the count is None where the cut is None or the tokenizer has no offsets."""
        if self._rust is None:
            return [(ids, spans, None) for ids, spans in self._slow(texts, add_special_tokens, offsets)]
        split = [
            not offsets and not add_special_tokens and cut is not None and self.hard_boundary(text, cut)
            for text, cut in zip(texts, cuts)
        ]
        fast, tracked = [], []  # pieces encoded without offsets; texts encoded with them
        for text, cut, piecewise in zip(texts, cuts, split):
            if piecewise:
                fast += [text[:cut], text[cut:]]
            elif cut is None and not offsets:
                fast.append(text)
            else:
                tracked.append(text)
        fast_ids = iter(
            [e.ids for e in self._rust.encode_batch_fast(fast, add_special_tokens=add_special_tokens)] if fast else ()
        )
        encodings = iter(self._rust.encode_batch(tracked, add_special_tokens=add_special_tokens) if tracked else ())
        out = []
        for cut, piecewise in zip(cuts, split):
            if piecewise:
                head = next(fast_ids)
                out.append((head + next(fast_ids), None, len(head)))
            elif cut is None and not offsets:
                out.append((next(fast_ids), None, None))
            else:
                encoding = next(encodings)
                count = None if cut is None else _tokens_before(encoding, cut)
                out.append((encoding.ids, encoding.offsets if offsets else None, count))
        return out

    def hard_boundary(self, text: str, at: int) -> bool:
        """Whether `text` may be tokenized as text[:at] and text[at:] with the whole text's ids."""
        if at <= 0 or not text.startswith(self._hard, at):
            return False
        # no added token may start before `at` and end after it (the whole text's match would win)
        return all(text.find(token, max(0, at - len(token) + 1), at + len(token) - 1) < 0 for token in self._added)

    def _slow(self, texts, add_special_tokens, offsets):
        if offsets:
            return self.encode_with_offsets(texts, add_special_tokens)
        return [(ids, None) for ids in self.encode(texts, add_special_tokens)]

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
