"""Models for the engine bench: the default model, or Llama-3.x shapes with random weights (no download)."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}

SHAPES = {
    # Compute next to nothing: what is left of a step is the engine's and the server's host work per token.
    "llama-host": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=True,
        vocab_size=512,
        bos_token_id=1,
        eos_token_id=2,
    ),
    # llama-host over the default model's 49,152-token vocabulary: a grammar's host work per step shows (bench.structured)
    "host-49k": dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        tie_word_embeddings=True,
        vocab_size=49152,
        bos_token_id=1,
        eos_token_id=2,
    ),
    "llama-tiny": dict(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=32,
        tie_word_embeddings=True,
    ),  # for checking the bench itself
    "llama-1b": dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        tie_word_embeddings=True,
    ),
    "llama-8b": dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        tie_word_embeddings=False,
    ),
}


def shape_vocab(shape: str) -> int:
    if shape == "default":
        from transformers import AutoConfig

        from scaleout_common.models import resolve_model

        return AutoConfig.from_pretrained(resolve_model(None)).vocab_size
    return SHAPES[shape].get("vocab_size", 128256)


def build_model(shape: str, device: str, dtype: torch.dtype, max_len: int = 131072):
    """The default model from its folder, or a Llama of `shape` with seeded random weights."""
    if shape == "default":
        from scaleout_common.models import resolve_model

        return AutoModelForCausalLM.from_pretrained(resolve_model(None), dtype=dtype).to(device).eval()
    defaults = dict(vocab_size=128256, bos_token_id=128000, eos_token_id=128001)
    config = LlamaConfig(
        **{**defaults, **SHAPES[shape]},
        max_position_embeddings=max_len,
        rms_norm_eps=1e-5,
        rope_parameters=dict(LLAMA3_ROPE),
        architectures=["LlamaForCausalLM"],
    )
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def projection_sizes(shape: dict) -> dict[str, tuple[int, int]]:
    """(out, in) of each projection of one layer of a shape in SHAPES, with the layers' fused qkv and gate_up."""
    hidden, inter = shape["hidden_size"], shape["intermediate_size"]
    heads, kv_heads, dim = shape["num_attention_heads"], shape["num_key_value_heads"], shape["head_dim"]
    return {
        "qkv": ((heads + 2 * kv_heads) * dim, hidden),
        "o_proj": (heads * dim, hidden),
        "gate_up": (2 * inter, hidden),
        "down": (hidden, inter),
    }
