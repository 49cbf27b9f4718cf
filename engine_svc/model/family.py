"""What sets one decoder family apart from another, read from its transformers config: one decoder grows by these
settings instead of a copy per model.

Llama is the base: pre-norm RMSNorm, fused qkv, RoPE, SwiGLU MLP. The others add, per family:
- Qwen3 (dense and MoE), Gemma 3: RMSNorm of each q and k head before RoPE (`qk_norm`);
- Gemma 2 / 3: norms that scale by 1 + weight (`norm_offset`), a norm after attention and after the MLP too
  (`sandwich`), GELU-tanh gating, embeddings scaled by sqrt(hidden), the attention scaled by
  query_pre_attn_scalar, sliding-window layers alternating with global ones, each kind with its own RoPE;
  Gemma 2 also soft-caps attention scores and the final logits (tanh(x / cap) * cap);
- Mistral (and Qwen2/3 with use_sliding_window): a sliding window on every (or the configured) layer;
- Qwen3 MoE: a routed mixture of experts in place of the MLP (moe.py);
- gpt-oss: attention sinks (a learned logit per head that takes softmax mass), sliding-window layers alternating
  with global ones, qkv and o_proj biases, its own experts (moe.py);
- GLM-4.5 (glm4_moe): qkv biases, optional q/k norm, partial rotary (decoder.py reads the rotary module's width),
  its first first_k_dense_replace layers dense, then experts with sigmoid grouped routing and shared experts;
- DeepSeek V3 (deepseek_v3: also Kimi K2's and Moonlight's architecture): GLM-4.5's routing, dense first layers and
  shared experts, and multi-head latent attention (mla.py), its scores scaled by qk_head_dim ** -0.5 (times YaRN's
  mscale_all_dim factor squared).
Each MoE family's routing rule is picked in one place: moe.Routing.of.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine_svc.model.mla import is_mla, mla_scale

FAST_PATH_ARCHITECTURES = {
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
    "GptOssForCausalLM",
    "Glm4MoeForCausalLM",
    "DeepseekV3ForCausalLM",
}
_ACTIVATIONS = {"silu": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh"}


@dataclass(frozen=True)
class Family:
    activation: str = "silu"  # of the gated MLP: silu (SwiGLU) or gelu_tanh (GeGLU)
    norm_offset: float = 0.0  # RMSNorm scales by norm_offset + weight (Gemma: 1)
    sandwich: bool = False  # a norm on the attention's and the MLP's outputs before each residual add
    embed_scale: float = 0.0  # embeddings times this (0: as the embedding module gives them)
    attention_scale: float = 0.0  # scores' scale (0: head_dim ** -0.5)
    attention_softcap: float = 0.0  # scores -> tanh(scores / cap) * cap (0: none)
    final_softcap: float = 0.0  # the same on the logits
    windows: tuple[int, ...] = ()  # per layer: keys within the last `window` positions (0: every key)
    rope_kinds: tuple[str, ...] = ()  # per layer: which RoPE table ("": the model's one table)
    sinks: bool = False  # a learned sink logit per head in every softmax (gpt-oss)

    @classmethod
    def of(cls, config) -> Family:
        model_type = config.model_type
        gemma = model_type.startswith("gemma")
        layers = config.num_hidden_layers
        types = getattr(config, "layer_types", None)
        window = getattr(config, "sliding_window", None) or 0
        windows = tuple(window if types is None or types[i] == "sliding_attention" else 0 for i in range(layers))
        per_type_rope = (
            isinstance(getattr(config, "rope_parameters", None), dict)
            and types is not None
            and all(t in config.rope_parameters for t in set(types))
        )
        scalar = getattr(config, "query_pre_attn_scalar", None)
        return cls(
            activation=_ACTIVATIONS.get(getattr(config, "hidden_activation", None) or config.hidden_act, "?"),
            norm_offset=1.0 if gemma else 0.0,
            sandwich=gemma and model_type != "gemma",
            # Where the embedding module does not scale itself (older transformers' Gemma, Gemma 2).
            embed_scale=config.hidden_size**0.5 if model_type in ("gemma", "gemma2") else 0.0,
            attention_scale=scalar**-0.5 if scalar else mla_scale(config) if is_mla(config) else 0.0,
            # Gemma 3's config has the field too, but its attention does not cap.
            attention_softcap=float(config.attn_logit_softcapping or 0.0) if model_type == "gemma2" else 0.0,
            final_softcap=float(getattr(config, "final_logit_softcapping", None) or 0.0),
            windows=windows,
            rope_kinds=tuple(types) if per_type_rope and types else ("",) * layers,
            sinks=model_type == "gpt_oss",
        )


def fast_path_problem(config) -> str | None:
    """Why the paged decoder cannot serve this config, or None when it can."""
    archs = set(getattr(config, "architectures", None) or [])
    if not archs & FAST_PATH_ARCHITECTURES:
        return f"architecture {sorted(archs) or config.model_type} is not on the fast path"
    if Family.of(config).activation == "?":
        return f"activation {getattr(config, 'hidden_activation', None) or config.hidden_act} is not supported"
    return None
