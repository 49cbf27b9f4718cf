"""A checkpoint folder's transformers config, with the model types transformers does not know mapped onto the
config class whose fields they carry.

Kimi K2 (`model_type: "kimi_k2"`, `architectures: ["DeepseekV3ForCausalLM"]`, an `auto_map` to Moonshot's copy of
DeepSeek's modeling code) has DeepSeek V3's fields: it loads as transformers' DeepseekV3Config, never through the
remote code, even under --trust-remote-code (which Kimi's tiktoken tokenizer needs): the fast path reads
transformers' own DeepseekV3 modules.
"""

from __future__ import annotations

import json
from pathlib import Path

AS_DEEPSEEK_V3 = ("kimi_k2",)


def hf_config(folder: Path, trust_remote_code: bool = False):
    from transformers import AutoConfig, DeepseekV3Config

    path = folder / "config.json"
    raw = json.loads(path.read_text()) if path.is_file() else {}
    if raw.get("model_type") not in AS_DEEPSEEK_V3:
        return AutoConfig.from_pretrained(folder, trust_remote_code=trust_remote_code)
    config = DeepseekV3Config.from_dict({k: v for k, v in raw.items() if k not in ("model_type", "auto_map")})
    config._name_or_path = str(folder)  # as from_pretrained sets it
    return config
