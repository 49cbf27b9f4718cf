"""Piecewise tokenization (render_svc/tokens.py): the whole text's ids, from the cache or not, and the first
turn's count as the offsets give it."""

from __future__ import annotations

import pytest

from render_svc.model import load_model
from render_svc.piece_cache import PieceCache
from render_svc.tokens import MIN_CACHED_CHARS, _position_dependent

DOC = "Le café crème coûte 3,50 € — 数据在服务器上 🎉. The quick brown fox jumps over the lazy dog.\n" * 12
TEXTS = [
    f"<|im_start|>system\n{DOC}<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    f"<|im_start|>user\n{DOC}  <|im_end|>\n<|im_start|>assistant\nFour.<|im_end|>\n<|im_start|>user\n{DOC}<|im_end|>",
    f"no added token at all: {DOC}",
    f"<|im_start|><|im_end|>{DOC}<|im_start|>  {DOC[:100]}<|im_end|><|endoftext|>",
]


@pytest.fixture(scope="module")
def tokens():
    return load_model(None).tokens


@pytest.mark.parametrize("cache_mb", [0, 1])
def test_pieces_give_the_whole_texts_ids_and_the_offsets_count(tokens, cache_mb):
    tokens.use_cache(cache_mb)
    whole = [ids for ids, _ in tokens.encode_with_offsets(TEXTS, add_special_tokens=False)]
    cuts = [text.find("<|im_end|>") if "<|im_end|>" in text else None for text in TEXTS]
    counted = tokens.encode_cut(TEXTS, cuts, add_special_tokens=False, offsets=True)
    for _ in range(2):  # the second time from the cache
        pieces = tokens.encode_cut(TEXTS, cuts, add_special_tokens=False, offsets=False)
        assert [ids for ids, _, _ in pieces] == whole
        assert [count for _, _, count in pieces] == [count for _, _, count in counted]
    assert (tokens.cache is not None and tokens.cache.hits > 0) == bool(cache_mb)


def test_a_cut_is_hard_only_where_the_tokenizer_cuts_on_a_position_free_pipeline(tokens):
    assert tokens.hard_boundary("Hi<|im_end|>", 2)
    assert not tokens.hard_boundary("Hi there", 2) and not tokens.hard_boundary("Hi<|im_end|>", 4)
    assert not tokens.hard_boundary("<|im_end|>", 0)
    metaspace = {"type": "Sequence", "pretokenizers": [{"type": "Metaspace", "prepend_scheme": "first"}]}
    assert _position_dependent(metaspace) and not _position_dependent({"type": "ByteLevel", "add_prefix_space": True})


def test_the_cache_keeps_the_most_recent_pieces_within_its_budget():
    cache = PieceCache(3 * (MIN_CACHED_CHARS + 1000))
    pieces = [chr(65 + i) * MIN_CACHED_CHARS for i in range(8)]
    for piece in pieces:
        cache.put(piece, list(range(100)))
    assert cache.size <= cache.budget and cache.get(pieces[0]) is None
    assert cache.get(pieces[-1]) == list(range(100))
