"""Piecewise tokenization (render_svc/tokens.py): the whole text's ids, from the cache or not, and the first
turn's count as the offsets give it; the fast byte-level BPE (render_svc/fast_bpe.py) gives the tokenizer's ids."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from render_svc.fast_bpe import fast_bpe
from render_svc.model import load_model
from render_svc.piece_cache import PieceCache
from render_svc.tokens import MIN_CACHED_CHARS, _position_dependent, _splitter
from render_svc.vllm_render.tokenize import tokenizer_info
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason

DOCS = Path(__file__).parents[2] / "docs"

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


def _random_texts(count: int) -> list[str]:
    """Texts of every script, whitespace of every kind (Unicode's too), digits, contractions and added tokens."""
    rng = random.Random(7)
    blocks = [(0x20, 0x7E), (0xA0, 0x17F), (0x370, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F), (0x3040, 0x30FF)]
    blocks += [(0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x1F300, 0x1FAFF), (0x2000, 0x206F), (0x0, 0x1F)]
    spaces = [" ", "\n", "\t", "\r", "\x0b", "\x85", "\xa0", "\u1680", "\u2000", "\u2028", "\u202f", "\u3000", "\u200b"]
    words = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "'s", "'ll", "'RE", "don't", "3,50 €"]
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 30)):
            kind = rng.random()
            if kind < 0.2:
                parts.append(rng.choice(spaces) * rng.randint(1, 3))
            elif kind < 0.3:
                parts.append(rng.choice(words))
            elif kind < 0.4:
                parts.append(str(rng.randint(0, 10**9)))
            else:
                low, high = rng.choice(blocks)
                parts.append("".join(chr(rng.randint(low, high)) for _ in range(rng.randint(1, 8))))
        texts.append("".join(parts))
    return texts


def test_the_fast_bpe_gives_the_tokenizers_ids(tokens):
    """tiktoken's core on SmolLM2's byte-level BPE (render_svc/fast_bpe.py): the same ids as `tokenizers` over
    texts of every script, or None (a byte the vocabulary lacks), never other ids."""
    fast = tokens._fast
    assert fast is not None  # SmolLM2's tokenizer is GPT-2's pipeline: the fast path is on
    texts = [*TEXTS, *_random_texts(3000), *(path.read_text() for path in sorted(DOCS.glob("*.md")))]
    answered = 0
    for text, encoding in zip(texts, tokens._rust.encode_batch_fast(texts, add_special_tokens=False)):
        ids = fast.encode(text)
        answered += ids is not None
        assert ids is None or ids == encoding.ids, text[:200]
    assert answered > len(texts) // 2
    assert fast.encode("a\x04b") is None  # the vocabulary has no id for byte 4: tokenizers' turn


def test_no_fast_bpe_where_the_pipeline_is_not_gpt2s(tokens):
    pipeline = json.loads(tokens._rust.to_str())
    for change in ({"normalizer": {"type": "NFC"}}, {"pre_tokenizer": {"type": "Whitespace"}}):
        other = Tokenizer.from_str(json.dumps({**pipeline, **change}))
        assert fast_bpe(other, _splitter(other)) is None
    assert fast_bpe(tokens._rust, None) is None


def test_vllm_tokenizer_info_is_opt_in_and_shows_the_served_template(renderers):
    """render_svc/vllm_render/tokenize.py: --chat-template's template replaces the folder's, as vLLM shows it."""
    with pytest.raises(ServiceError) as off:
        tokenizer_info(renderers["llama3"], enabled=False)
    assert off.value.reason == Reason.ROUTE_NOT_ENABLED
    config = json.loads(tokenizer_info(renderers["llama3"], enabled=True).data)
    assert config["chat_template"] == renderers["llama3"].model.tokenizer.chat_template != ""
    assert "vocab_file" not in config and config["name_or_path"] == renderers["llama3"].model.name
