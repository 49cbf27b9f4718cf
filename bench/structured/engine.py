"""The bench's engine: a model of a shape with the grammar backend over the default model's tokenizer (a module of
its own, so an engine core process can build it from a pickle)."""

from __future__ import annotations

from pathlib import Path

import torch

from bench.engine.shapes import build_model
from engine_svc.serving.loader import build_engine, make_grammar_backend, pick_dtype
from scaleout_common.models import load_tokenizer, resolve_model


def build(args, engine_args):
    """The engine with its grammar backend (module level: an engine core process builds it from a pickle)."""
    device = torch.device(args.device)
    model = build_model(args.shape, args.device, pick_dtype(engine_args.dtype, device))
    tokenizer = load_tokenizer(Path(args.tokenizer) if args.tokenizer else resolve_model(None))
    backend = make_grammar_backend(tokenizer, model.config.vocab_size, engine_args)
    return build_engine(model, engine_args, model_name=args.shape, grammar_backend=backend)
