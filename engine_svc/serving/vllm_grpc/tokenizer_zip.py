"""GetTokenizer's bundle: a zip of the model folder's tokenizer files and chat template, as SMG unpacks it
(the same file set as SMG's own servicers send: its tokenizer crate's files plus the model config files)."""

from __future__ import annotations

import functools
import io
import zipfile
from pathlib import Path

from scaleout_common.reasons import Reason, fail

CHUNK_BYTES = 64 * 1024  # per message (SMG's client limits)
FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "config.json",
    "generation_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "tiktoken.model",
    "chat_template.json",
)
PATTERNS = ("*.tiktoken", "*.jinja", "*.model")


@functools.lru_cache(maxsize=1)
def tokenizer_zip(folder: str) -> bytes:
    """The bundle of `folder` (built once: the files do not change while the engine serves them)."""
    found: dict[str, Path] = {}
    if folder:
        root = Path(folder)
        found = {p.name: p for p in (root / name for name in FILES) if p.is_file()}
        for pattern in PATTERNS:
            found.update({p.name: p for p in sorted(root.glob(pattern)) if p.is_file() and p.name not in found})
    if not found:
        raise fail(Reason.NO_TOKENIZER_FILES, "this engine's model was not loaded from a folder with a tokenizer")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, path in found.items():
            bundle.write(path, name)
    return buffer.getvalue()
