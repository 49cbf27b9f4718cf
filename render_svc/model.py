"""What render_svc knows about its model: tokenizer, chat template, model length, generation defaults, identity."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from render_svc.tokens import Tokens
from scaleout_common.models import load_tokenizer, model_name, resolve_model, tokenizer_fingerprint
from scaleout_common.sampling_rules import GENERATION_CONFIG_KEYS

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


# config.json keys that bound the context, in vLLM's order of preference.
_LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
    "model_max_length",
)
_FALLBACK_LENGTH = 2048


@dataclass
class Model:
    folder: Path
    names: list[str]  # served names; the first one is used in responses
    tokenizer: PreTrainedTokenizerBase
    tokens: Tokens
    max_model_len: int
    generation_defaults: dict  # SamplingParams field -> generation_config.json value
    fingerprint: str
    created: int

    @property
    def name(self) -> str:
        return self.names[0]


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def context_length(config: dict, tokenizer) -> int:
    for key in _LENGTH_KEYS:
        value = config.get(key) or config.get("text_config", {}).get(key)
        if isinstance(value, int) and value > 0:
            return value
    limit = getattr(tokenizer, "model_max_length", None)
    return limit if isinstance(limit, int) and 0 < limit < 10**7 else _FALLBACK_LENGTH


def generation_defaults(folder: Path) -> dict:
    config = _read_json(folder / "generation_config.json")
    return {field: config[key] for key, field in GENERATION_CONFIG_KEYS.items() if config.get(key) is not None}


def load_model(
    model: str | None,
    served_names: list[str] | None = None,
    chat_template: str | None = None,
    max_model_len: int | None = None,
    trust_remote_code: bool = False,
) -> Model:
    folder = resolve_model(model)
    tokenizer = load_tokenizer(folder, trust_remote_code, chat_template)
    length = context_length(_read_json(folder / "config.json"), tokenizer)
    if max_model_len and max_model_len > length:  # as vLLM and the engine refuse it: positions never trained
        raise ValueError(
            f"--max-model-len {max_model_len} is longer than the model's context ({length}): pass at most that"
        )
    length = max_model_len or length
    tokens = Tokens(tokenizer)
    return Model(
        folder=folder,
        names=list(served_names or [model_name(folder)]),
        tokenizer=tokenizer,
        tokens=tokens,
        max_model_len=length,
        generation_defaults=generation_defaults(folder),
        fingerprint=tokenizer_fingerprint(tokenizer),
        created=int(time.time()),
    )
