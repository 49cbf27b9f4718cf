"""gpt-oss model folders for serving tests and GPU scripts: the o200k_harmony tokenizer (tests/engine/o200k_harmony.py),
the published chat template (openai/gpt-oss-20b's chat_template.jinja, kept in tests/render/templates/gpt_oss.jinja)
and generation_config.json, with either tiny random weights (`tiny_folder`, for CPU tests) or none at all
(`python -m tests.models.gpt_oss DIR`: config.json of bench/engine/shapes.py's gpt-oss-20b, for render and derender
beside an engine that builds that shape itself; ~28 MB, the tokenizer.json).

Stops: the published generation_config.json ends on <|return|> and <|endoftext|>; <|call|> is added, as vLLM's
harmony path adds it (openai_harmony's stop tokens for assistant actions), so that a tool call ends its turn."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from tests.engine.o200k_harmony import NAMED, VOCAB_SIZE, o200k_harmony_folder

TEMPLATE = Path(__file__).parents[1] / "render" / "templates" / "gpt_oss.jinja"
STOPS = [NAMED["<|return|>"], NAMED["<|endoftext|>"], NAMED["<|call|>"]]
GENERATION = {"bos_token_id": NAMED["<|startoftext|>"], "eos_token_id": STOPS, "pad_token_id": NAMED["<|endoftext|>"]}


def add_chat_parts(folder: Path) -> Path:
    """The tokenizer files, the chat template and generation_config.json into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for source in o200k_harmony_folder().iterdir():
        shutil.copyfile(source, folder / source.name)
    shutil.copyfile(TEMPLATE, folder / "chat_template.jinja")
    (folder / "generation_config.json").write_text(json.dumps(GENERATION, indent=2) + "\n")
    return folder


def tiny_folder(folder: Path, seed: int = 0) -> Path:
    """A random-weight gpt-oss of small dims over the real 201,088-token vocabulary (bf16, ~30 MB), served as is."""
    import torch
    from transformers import GptOssConfig, GptOssForCausalLM

    config = GptOssConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        intermediate_size=32,
        num_hidden_layers=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        **GENERATION,
    )
    torch.manual_seed(seed)
    model = GptOssForCausalLM(config).bfloat16().eval()
    model.config.architectures = [type(model).__name__]
    model.save_pretrained(folder)
    return add_chat_parts(folder)


def serving_folder(folder: Path) -> Path:
    """Weightless: what render and derender read, with the gpt-oss-20b shape's config.json."""
    from bench.engine.shapes import shape_config

    shape_config("gpt-oss-20b").save_pretrained(folder)
    return add_chat_parts(folder)


if __name__ == "__main__":
    print(serving_folder(Path(sys.argv[1]).resolve()))
