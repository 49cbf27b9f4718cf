"""The bench's engine: a model of a shape with the grammar backend over the default model's tokenizer (a module of
its own, so an engine core process can build it from a pickle)."""

from __future__ import annotations

from pathlib import Path

import torch

from bench.engine.shapes import build_model
from engine_svc.serving.loader import build_engine, make_grammar_backend, pick_dtype
from scaleout_common.models import load_tokenizer, resolve_model


def bench_model(shape: str, device: str, dtype: torch.dtype):
    if shape == "host-49k":  # next to no compute and the default vocabulary: the host's work per step shows
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        config = LlamaConfig(
            vocab_size=49152,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
            max_position_embeddings=4096,
            tie_word_embeddings=True,
            bos_token_id=1,
            eos_token_id=2,
            architectures=["LlamaForCausalLM"],
        )
        return LlamaForCausalLM(config).to(device).eval()
    return build_model(shape, device, dtype)


def build(args, engine_args):
    """The engine with its grammar backend (module level: an engine core process builds it from a pickle)."""
    device = torch.device(args.device)
    model = bench_model(args.shape, args.device, pick_dtype(engine_args.dtype, device))
    tokenizer = load_tokenizer(Path(args.tokenizer) if args.tokenizer else resolve_model(None))
    backend = make_grammar_backend(tokenizer, model.config.vocab_size, engine_args)
    return build_engine(model, engine_args, model_name=args.shape, grammar_backend=backend)
