"""vLLM's dev route `GET /server_info?config_format=text|json` as one object for both peers that ask it.

vLLM 0.33 (serve/dev/server_info) answers `{"vllm_config": ..., "vllm_env": ..., "system_env": ...}`: its resolved
VllmConfig as a JSON tree (`config_format=json`) or as text (the default). SMG asks the same path first for
SGLang's `/get_server_info` fields. So the answer is SGLang's fields (sglang_server.py's table) with vLLM's two keys
beside them: `vllm_config` (the sections below, the ones trainers read: TRL 1.16 reads `weight_transfer_config`
(null means no weight sync), `model_config.logprobs_mode` and `.dtype`, `lora_config` (null: no LoRA; else the
engine's --max-lora-rank, --max-loras, --max-cpu-loras) and `parallel_config.data_parallel_size`;
`speculative_config` is the engine's, null when it does not speculate) and `vllm_env` (empty: no `VLLM_*` variable
is read here). `system_env` (vLLM's collect_env of its one machine) is not served: each service runs on its own
machines.
As text, `vllm_config` is the same tree as one line, `section=value` pairs joined by ", " (vLLM prints its
dataclasses' repr there). A replica is one data-parallel rank (as `/get_world_size` counts them); the stack has no
tensor or pipeline parallelism.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pipeline_svc.faces.sglang_server import Card, Info, server_info
from scaleout_common.errors import quote
from scaleout_common.reasons import Reason, fail

Row = Callable[[Card, Info, int], object]  # (the served model's card, an engine's model info, replicas) -> value

# vLLM's VllmConfig sections <- the card, an engine's model info and the number of engine replicas; None: a section
# vLLM prints null for a server without the feature.
VLLM_CONFIG: dict[str, dict[str, Row] | None] = {
    "model_config": {
        "model": lambda card, info, replicas: card.root,
        "tokenizer": lambda card, info, replicas: card.root,
        "served_model_name": lambda card, info, replicas: card.id,
        "architectures": lambda card, info, replicas: [info.architecture],
        "dtype": lambda card, info, replicas: info.dtype,
        "max_model_len": lambda card, info, replicas: card.max_model_len,
        "quantization": lambda card, info, replicas: info.quantization or None,
        "logprobs_mode": lambda card, info, replicas: info.logprobs_mode,
    },
    "cache_config": {
        "block_size": lambda card, info, replicas: info.kv_block_size,
        "cache_dtype": lambda card, info, replicas: info.kv_cache_dtype or "auto",
        "num_gpu_blocks": lambda card, info, replicas: info.num_kv_blocks,
    },
    "parallel_config": {
        "tensor_parallel_size": lambda card, info, replicas: 1,
        "pipeline_parallel_size": lambda card, info, replicas: 1,
        "data_parallel_size": lambda card, info, replicas: replicas,
    },
    "scheduler_config": {
        "max_num_seqs": lambda card, info, replicas: info.max_running,
        "max_model_len": lambda card, info, replicas: card.max_model_len,
    },
    "device_config": {
        "device": lambda card, info, replicas: info.device,
    },
    "weight_transfer_config": {
        "backend": lambda card, info, replicas: info.weight_transfer_backend,
    },
    # Null unless the engine serves LoRA adapters (its --enable-lora): then vLLM's LoRAConfig fields it has.
    "lora_config": {
        "max_lora_rank": lambda card, info, replicas: info.lora_config.max_lora_rank,
        "max_loras": lambda card, info, replicas: info.lora_config.max_loras,
        "max_cpu_loras": lambda card, info, replicas: info.lora_config.max_cpu_loras,
    },
    # Null unless the engine speculates (its --speculative-config): then vLLM's SpeculativeConfig fields it sets.
    "speculative_config": {
        "method": lambda card, info, replicas: info.speculative_config.method,
        "model": lambda card, info, replicas: info.speculative_config.model,
        "num_speculative_tokens": lambda card, info, replicas: info.speculative_config.num_speculative_tokens,
        "prompt_lookup_min": lambda card, info, replicas: info.speculative_config.prompt_lookup_min or None,
        "prompt_lookup_max": lambda card, info, replicas: info.speculative_config.prompt_lookup_max or None,
        "draft_sample_method": lambda card, info, replicas: info.speculative_config.draft_sample_method,
    },
}
# Sections present only where the engine's model info has its message.
OPTIONAL = {"speculative_config": "speculative_config", "lora_config": "lora_config"}
FORMATS = ("text", "json")


def vllm_config(card: Card, info: Info, replicas: int) -> dict:
    return {
        section: None
        if rows is None or (section in OPTIONAL and not info.HasField(OPTIONAL[section]))
        else {name: value(card, info, replicas) for name, value in rows.items()}
        for section, rows in VLLM_CONFIG.items()
    }


def server_info_body(card: Card, info: Info, replicas: int, config_format: str) -> dict:
    """The answer: SGLang's fields, then vLLM's `vllm_config` as `config_format` asks ("" is vLLM's default, text)."""
    config_format = config_format or "text"
    if config_format not in FORMATS:
        raise fail(
            Reason.INVALID_REQUEST, f"config_format {quote(config_format)}: one of {list(FORMATS)}", "config_format"
        )
    config = vllm_config(card, info, replicas)
    if config_format == "text":
        config = ", ".join(f"{section}={json.dumps(value)}" for section, value in config.items())
    return server_info(card, info) | {"vllm_config": config, "vllm_env": {}}
