"""Tiny random-weight models of each fast-path family, built with transformers' own config classes, and
transformers' own forward as the reference."""

from __future__ import annotations

import torch
from transformers import (
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
    Gemma2Config,
    Gemma2ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    Glm4MoeConfig,
    Glm4MoeForCausalLM,
    GptOssConfig,
    GptOssForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

WINDOW = 8  # the sliding window of the families that have one: the tests' prompts are longer
COMMON = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=512,
    eos_token_id=2,
    bos_token_id=1,
    pad_token_id=0,
)


def _qwen3():
    return Qwen3ForCausalLM(Qwen3Config(**COMMON, num_hidden_layers=2, tie_word_embeddings=False))


def _mistral():
    return MistralForCausalLM(MistralConfig(**COMMON, num_hidden_layers=2, sliding_window=WINDOW))


def _gemma3():
    config = Gemma3TextConfig(
        **COMMON,
        num_hidden_layers=4,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"] * 2,
        query_pre_attn_scalar=24,  # not head_dim: the scale must come from it
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "linear", "rope_theta": 1_000_000.0, "factor": 8.0},
        },
    )
    return Gemma3ForCausalLM(config)


def _gemma2():
    config = Gemma2Config(
        **COMMON,
        num_hidden_layers=2,
        sliding_window=WINDOW,
        query_pre_attn_scalar=16,
        attn_logit_softcapping=5.0,  # low caps, so that capping changes the scores of these tiny models
        final_logit_softcapping=3.0,
    )
    return Gemma2ForCausalLM(config)


def _qwen3_moe():
    config = Qwen3MoeConfig(
        **COMMON,
        num_hidden_layers=2,
        num_experts=8,
        num_experts_per_tok=3,
        moe_intermediate_size=32,
        norm_topk_prob=True,
        mlp_only_layers=[1],  # one routed layer, one dense
        tie_word_embeddings=False,
    )
    return Qwen3MoeForCausalLM(config)


def _gpt_oss():
    config = GptOssConfig(
        **{**COMMON, "intermediate_size": 32},
        num_hidden_layers=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"],
        swiglu_limit=3.0,  # low, so that the clamp bites in these tiny models
        rope_parameters={  # YaRN, as gpt-oss ships, at 8x of a 64-token original context
            "rope_type": "yarn",
            "factor": 8.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 64,
            "rope_theta": 150000.0,
        },
    )
    return GptOssForCausalLM(config)


# GLM-4.5's and DeepSeek V3's routing: a dense layer, then a routed one of 4 groups of 4 experts, the best 2 groups
# kept (the others' experts are out of the choice), 3 experts a token beside a shared one.
GROUPED_MOE = dict(
    first_k_dense_replace=1,
    n_routed_experts=16,
    n_group=4,
    topk_group=2,
    num_experts_per_tok=3,
    n_shared_experts=1,
    moe_intermediate_size=32,
    routed_scaling_factor=2.5,
    norm_topk_prob=True,
)


def _with_correction_bias(model):
    for layer in model.model.layers[model.config.first_k_dense_replace :]:  # a buffer: tiny() leaves it be
        layer.mlp.gate.e_score_correction_bias.normal_(0, 0.2)
    return model


def _glm4_moe():
    config = Glm4MoeConfig(
        **COMMON,
        **GROUPED_MOE,
        num_hidden_layers=2,
        use_qk_norm=True,
        attention_bias=True,
        partial_rotary_factor=0.5,  # the first 8 of each head's 16 dims rotate
    )
    return _with_correction_bias(Glm4MoeForCausalLM(config))


def _deepseek_v3(q_lora_rank: int | None):
    """MLA with qk_nope 16 + qk_rope 8 (cached 32 wide) and a v_head_dim of its own; interleaved RoPE under YaRN
    whose mscale_all_dim scales the scores; GLM-4.5's routing (GROUPED_MOE)."""
    common = {k: v for k, v in COMMON.items() if k != "head_dim"}
    config = DeepseekV3Config(
        **{**common, "num_key_value_heads": 4},
        **GROUPED_MOE,
        num_hidden_layers=2,
        q_lora_rank=q_lora_rank,
        kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=12,
        rope_interleave=True,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10_000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 128,  # 4x: max_position_embeddings
            "mscale": 1.0,
            "mscale_all_dim": 0.7,  # not mscale: the table's factor is not 1 either
            "beta_fast": 32.0,
            "beta_slow": 1.0,
        },
        tie_word_embeddings=False,
    )
    return _with_correction_bias(DeepseekV3ForCausalLM(config))


FAMILIES = {
    "qwen3": _qwen3,
    "mistral": _mistral,
    "gemma3": _gemma3,
    "gemma2": _gemma2,
    "qwen3_moe": _qwen3_moe,
    "gpt_oss": _gpt_oss,
    "glm4_moe": _glm4_moe,
    "deepseek_v3": lambda: _deepseek_v3(24),  # DeepSeek V3 / Kimi K2: q through a low-rank pair
    "deepseek_v3_q": lambda: _deepseek_v3(None),  # Moonlight: one q_proj
}


def tiny(family: str, seed: int = 0):
    """A tiny `family` model in float32 with matrices 5x the default init (so that attention, masks and caches
    show in the greedy tokens) and every norm weight jittered (so that a dropped norm or offset shows)."""
    torch.manual_seed(seed)
    model = FAMILIES[family]().eval()
    model.config.architectures = [type(model).__name__]
    with torch.no_grad():
        for weight in model.parameters():
            if weight.dim() >= 2:
                weight.mul_(5)
            else:
                weight.add_(torch.randn_like(weight) * 0.2)
    return model


@torch.inference_mode()
def logits_of(model, tokens: list[int]) -> torch.Tensor:
    """transformers' logits [positions, vocab] over the whole sequence, no cache."""
    return model(torch.tensor([tokens])).logits[0]


def greedy(model, prompt: list[int], new_tokens: int) -> list[int]:
    """transformers' greedy continuation, one whole forward per token (no cache to trust)."""
    tokens = list(prompt)
    for _ in range(new_tokens):
        tokens.append(int(logits_of(model, tokens)[-1].argmax()))
    return tokens[len(prompt) :]
