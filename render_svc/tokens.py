"""Tokenization through the fast tokenizer's Rust core: batch calls that release the GIL, ids without offsets
unless asked. Equal to `tokenizer(text, add_special_tokens=...)` (what apply_chat_template(tokenize=True) runs)."""

from __future__ import annotations


class Tokens:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.vocab_size = len(tokenizer)
        self._rust = getattr(tokenizer, "_tokenizer", None)
        if self._rust is not None:
            # The Python wrapper sets these per call; direct calls must see the same (no truncation or padding).
            self._rust.no_truncation()
            self._rust.no_padding()
            self._rust.encode_special_tokens = bool(getattr(tokenizer, "split_special_tokens", False))

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

    def decode(self, ids, skip_special_tokens: bool) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_strs(self, ids) -> list[str]:
        return self.tokenizer.convert_ids_to_tokens(list(ids))
