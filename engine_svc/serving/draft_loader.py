"""The draft model of `--speculative-config` method "draft_model": checked against the target (vocabulary size,
tokenizer, context length) before its weights load, then loaded on the target's device and dtype and wrapped by the
runner code the target uses (the paged runner where its family is on the fast path, without piecewise graphs: its
steps are short; its KV cache in the target's cache dtype, sized with the target's, same blocks)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoConfig

from engine_svc.model.attention import pick_attention
from engine_svc.model.decoder import head_dim
from engine_svc.model.family import fast_path_problem
from engine_svc.model.hf_runner import TransformersRunner
from engine_svc.model.runner import ModelRunner, kv_cache_torch_dtype
from engine_svc.scheduling.speculation import SpecConfig
from scaleout_common.models import load_tokenizer, resolve_model


def _has_tokenizer(folder: Path) -> bool:
    return (folder / "tokenizer.json").is_file() or (folder / "tokenizer_config.json").is_file()


def check_draft(folder: Path, config, target_config, target_path: str, max_model_len: int, trust: bool) -> None:
    """Refuse a draft that cannot draft for the target: another vocabulary size, another tokenizer (when both
    folders have one), or a shorter context than the engine serves."""
    where = f"--speculative-config: the draft model {folder}"
    if config.vocab_size != target_config.vocab_size:
        raise ValueError(
            f"{where} has a vocabulary of {config.vocab_size} tokens, the target {target_config.vocab_size}: "
            "a draft needs the target's tokenizer"
        )
    if target_path and _has_tokenizer(Path(target_path)) and _has_tokenizer(folder):
        ours, theirs = (load_tokenizer(Path(path), trust).get_vocab() for path in (target_path, folder))
        if ours != theirs:
            differ = sorted(set(ours.items()) ^ set(theirs.items()))[:3]
            raise ValueError(f"{where} has another tokenizer than the target (tokens differ: {differ})")
    context = getattr(config, "max_position_embeddings", max_model_len)
    if context < max_model_len:
        raise ValueError(f"{where} takes {context} positions, fewer than --max-model-len {max_model_len}")


def load_draft(
    spec: SpecConfig,
    args,
    target_config,
    device: torch.device,
    dtype: torch.dtype,
    max_model_len: int,
    target_path,
    load,
) -> tuple[ModelRunner | TransformersRunner, int]:
    """The draft's runner (its model loaded by `load`, the loader's load_hf_model), its KV cache not allocated yet
    (ModelRunner.allocate_kv, with the target's block count), and that cache's bytes per block (0 for the
    transformers runner, whose cache is its own)."""
    folder = resolve_model(spec.model)
    trust = args.trust_remote_code
    config = AutoConfig.from_pretrained(folder, trust_remote_code=trust)
    check_draft(folder, config, target_config, target_path, max_model_len, trust)
    model = load(folder, device, dtype, trust)
    if args.backend == "transformers" or fast_path_problem(config):
        return TransformersRunner(model), 0
    per_block = ModelRunner.kv_bytes_per_block(
        config, args.block_size, kv_cache_torch_dtype(args.kv_cache_dtype, dtype)
    )
    runner = ModelRunner(
        model,
        block_size=args.block_size,
        num_blocks=0,
        max_num_seqs=args.max_num_seqs,
        max_model_len=max_model_len,
        cuda_graphs=not args.no_cuda_graphs,
        compile_kernels=device.type == "cuda" and not args.no_compile,
        attention=pick_attention(args.attention, device, head_dim(config)),
        kv_cache_dtype=args.kv_cache_dtype,
        consume_model=True,
    )
    return runner, per_block
