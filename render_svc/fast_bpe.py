"""A byte-level BPE tokenizer's ids through tiktoken's BPE core, where that gives exactly the tokenizer's ids:
~6x less CPU than `tokenizers` on a long text (a new 2,000-token chat is otherwise mostly its tokenization).

tiktoken merges, within each pre-tokenized word, the adjacent pair whose joined bytes have the lowest rank;
`tokenizers` the pair whose merge comes first in the merges list. With each merge's result ranked by its id,
both orders are one where ids grow with the merges list, which is checked here, with the rest of the pipeline
being GPT-2's (checked in tokenizer.json, else no fast path):
- model BPE: no dropout, unk token, byte fallback, subword prefix or word suffix, merges not ignored, every
  merge's result in the vocabulary with an id above those of all earlier merges;
- no normalizer; pre-tokenizer ByteLevel with its regex (GPT-2's, `PATTERN`) and no added prefix space;
- every added token matched on the raw text (the caller's `splitter` cuts at them; each maps to its id).
A byte that has no id of its own gets one past the vocabulary; a text that needs it goes to `tokenizers`
(`encode` answers None). tests/render/test_tokens.py holds both side by side over texts of every script.
"""

from __future__ import annotations

import json
import re

import tiktoken

from scaleout_common.byte_level import byte_level_alphabet

# tokenizers' ByteLevel pre-tokenizer regex (GPT-2's)
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


class FastBpe:
    def __init__(self, encoding: tiktoken.Encoding, added: dict[str, int], splitter: re.Pattern, limit: int):
        self._encode = encoding.encode_ordinary
        self._added = added
        self._splitter = splitter
        self._limit = limit  # ids at or past it are bytes the vocabulary lacks

    def encode(self, text: str) -> list[int] | None:
        """`text`'s ids (added tokens included, no special tokens added), or None where `tokenizers` must do it."""
        ids: list[int] = []
        start = 0
        for match in self._splitter.finditer(text):
            if match.start() > start:
                ids += self._encode(text[start : match.start()])
            ids.append(self._added[match.group()])
            start = match.end()
        if start < len(text):
            ids += self._encode(text[start:])
        return None if ids and max(ids) >= self._limit else ids


def fast_bpe(rust, splitter: re.Pattern | None) -> FastBpe | None:
    """The fast path for tokenizers.Tokenizer `rust`, or None where it would not give the same ids."""
    if splitter is None:
        return None
    pipeline = json.loads(rust.to_str())
    model, pre = pipeline.get("model") or {}, pipeline.get("pre_tokenizer") or {}
    plain_bpe = model.get("type") == "BPE" and not any(
        model.get(key) for key in ("dropout", "unk_token", "byte_fallback", "ignore_merges")
    )
    if not plain_bpe or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return None
    byte_level = pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space")
    if pipeline.get("normalizer") is not None or not byte_level:
        return None
    added = rust.get_added_tokens_decoder()
    if any(token.normalized for token in added.values()):
        return None
    chars = byte_level_alphabet()
    vocab = model["vocab"]
    ranks: dict[bytes, int] = {}
    last = -1
    for merge in model["merges"]:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        joined = left + right
        if vocab.get(joined, -1) <= last or not all(c in chars for c in joined):
            return None
        last = ranks[bytes(chars[c] for c in joined)] = vocab[joined]
    limit = rust.get_vocab_size(with_added_tokens=True)
    for char, byte in chars.items():
        ranks.setdefault(bytes([byte]), vocab.get(char, limit + byte))
    encoding = tiktoken.Encoding("scaleout-render", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})
    return FastBpe(encoding, {token.content: id_ for id_, token in added.items()}, splitter, limit)
