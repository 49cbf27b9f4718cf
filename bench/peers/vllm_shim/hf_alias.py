"""The Hugging Face names vLLM's tests ask for, answered offline with the model our stack serves under them.

The tests read their model's config and tokenizer themselves (`AutoConfig.from_pretrained("Qwen/Qwen3-0.6B")`,
`ModelConfig(model=...)`, `get_tokenizer(...)`) to check vocabulary sizes and token ids against what the server
answers. Our stack serves its own model under those names, so each name becomes an entry of an offline hub
cache whose snapshot is that model's folder (HF_HUB_CACHE, HF_HUB_OFFLINE): the tests then compare like with like.
"""

from __future__ import annotations

import re
from pathlib import Path

# The model names a test file starts its server with, or keeps as a constant (MODEL_NAME, MODEL, PARSER_MODEL, ...),
# or lists as a model's info, as the first item of a (name, args) pair or as a value of a dict ({"text": name}).
_NAMED = re.compile(
    r'(?:MODEL(?:_NAME)?\s*=\s*|RemoteOpenAIServer\(\s*|ModelInfo\(\s*|^\s*\(\s*|^\s*"\w+":\s*)"([\w.-]+/[\w.-]+)"',
    re.M,
)
_REVISION = "0" * 40  # one snapshot per name: our model's files


def model_names(files: list[Path]) -> set[str]:
    return {name for f in files for name in _NAMED.findall(f.read_text())}


def alias(names: set[str], folder: Path, cache: Path) -> None:
    """An offline hub cache in `cache` where every name's main revision is `folder`'s files."""
    for name in names:
        repo = cache / ("models--" + name.replace("/", "--"))
        snapshot = repo / "snapshots" / _REVISION
        snapshot.mkdir(parents=True, exist_ok=True)
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(_REVISION)
        for item in folder.iterdir():
            link = snapshot / item.name
            if not link.exists():
                link.symlink_to(item.resolve())
