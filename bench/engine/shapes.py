"""Models for the engine bench: the default model, or Llama-3.x shapes and the other fast-path families' real
shapes (FAMILY_SHAPES) with random weights (no download)."""

from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig

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


_QWEN3 = dict(vocab_size=151936, bos_token_id=151643, eos_token_id=151645, rms_norm_eps=1e-6, head_dim=128)
# Other families at their published shapes (config.json of each): model_type picks transformers' config class.
FAMILY_SHAPES: dict[str, dict] = {
    "qwen3-8b": dict(
        _QWEN3,
        model_type="qwen3",
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        tie_word_embeddings=False,
    ),
    "qwen3-30b-a3b": dict(
        _QWEN3,
        model_type="qwen3_moe",
        hidden_size=2048,
        intermediate_size=6144,
        moe_intermediate_size=768,
        num_experts=128,
        num_experts_per_tok=8,
        norm_topk_prob=True,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        tie_word_embeddings=False,
    ),
    "mistral-7b": dict(
        model_type="mistral",
        vocab_size=32768,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        sliding_window=None,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        tie_word_embeddings=False,
    ),
    # Mistral 7B with an 8-token window on every layer: its output depends on the last 32 x 7 + 1 tokens alone
    # (RoPE is relative), so a random-weight 7B writes again what it wrote after the same 225 tokens: the copying
    # that n-gram speculation lives on (bench.engine.spec_decode's echo), at a 7B's cost per step.
    "mistral-7b-w8": dict(
        model_type="mistral",
        vocab_size=32768,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        sliding_window=8,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        tie_word_embeddings=False,
    ),
    # GLM-4.5-Air (zai-org/GLM-4.5-Air's config.json): one dense layer, then 45 of 128 routed experts (8 a token,
    # sigmoid routing in one group) beside one shared expert; half of each head's dims rotate; qkv biases.
    "glm-4.5-air": dict(
        model_type="glm4_moe",
        vocab_size=151552,
        hidden_size=4096,
        intermediate_size=10944,
        moe_intermediate_size=1408,
        n_routed_experts=128,
        n_shared_experts=1,
        num_experts_per_tok=8,
        first_k_dense_replace=1,
        n_group=1,
        topk_group=1,
        norm_topk_prob=True,
        routed_scaling_factor=1.0,
        num_hidden_layers=46,
        num_attention_heads=96,
        num_key_value_heads=8,
        head_dim=128,
        attention_bias=True,
        use_qk_norm=False,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0, "partial_rotary_factor": 0.5},
        pad_token_id=151329,
        eos_token_id=[151329, 151336, 151338],
        tie_word_embeddings=False,
    ),
    # openai/gpt-oss-20b's config.json: 32 experts (4 a token) with biases and a clamped SwiGLU, attention sinks,
    # 128-token windows on every other layer, YaRN RoPE; bf16 weights here (the release ships MXFP4 experts).
    "gpt-oss-20b": dict(
        model_type="gpt_oss",
        vocab_size=201088,
        hidden_size=2880,
        intermediate_size=2880,
        num_hidden_layers=24,
        num_local_experts=32,
        num_experts_per_tok=4,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        sliding_window=128,
        layer_types=["sliding_attention", "full_attention"] * 12,
        attention_bias=True,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 150_000.0,
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
        eos_token_id=[200002, 199999, 200012],
        pad_token_id=199999,
        tie_word_embeddings=False,
    ),
    # moonshotai/Moonlight-16B-A3B's config.json (DeepSeek V3's architecture, as Kimi K2's): MLA with one q_proj
    # (no q_lora_rank), a 512-wide latent, 128 + 64 query/key dims (cached 256 wide, engine_svc/model/mla.py) and
    # 128 value dims over 16 heads; one dense layer, then 6 of 64 routed experts a token beside 2 shared ones.
    "moonlight-16b-a3b": dict(
        model_type="deepseek_v3",
        vocab_size=163840,
        hidden_size=2048,
        intermediate_size=11264,
        moe_intermediate_size=1408,
        num_hidden_layers=27,
        num_attention_heads=16,
        num_key_value_heads=16,
        q_lora_rank=None,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        n_routed_experts=64,
        n_shared_experts=2,
        num_experts_per_tok=6,
        first_k_dense_replace=1,
        n_group=1,
        topk_group=1,
        norm_topk_prob=True,
        routed_scaling_factor=2.446,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 50_000.0},
        bos_token_id=163584,
        eos_token_id=163586,
        tie_word_embeddings=False,
    ),
    "gemma3-270m": dict(
        model_type="gemma3_text",
        vocab_size=262144,
        hidden_size=640,
        intermediate_size=2048,
        num_hidden_layers=18,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=256,
        query_pre_attn_scalar=256,
        sliding_window=512,
        layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 3,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
        },
        bos_token_id=2,
        eos_token_id=1,
        tie_word_embeddings=True,
    ),
}


# The whole GLM-4.5-Air is 106B parameters (212 GB in bf16): more than one H200. Its first 12 layers (54 GB)
# fit one H100 or H200 with room for the KV cache (the layers' part of a step time grows 46 / 12 in the whole).
FAMILY_SHAPES["glm-4.5-air-12l"] = dict(FAMILY_SHAPES["glm-4.5-air"], num_hidden_layers=12)


# Random-weight models that copy, for speculation's repetitive workload (bench/engine/spec_decode.py): a shape's
# model whose layers' outputs are scaled down 1,000x and whose head is its embeddings in a fixed random order, so
# the next token is a fixed permutation of the current one with a logit margin ~64x any other's: the shape's whole
# cost per step (every matmul, attention over the whole context) and a text no rounding changes (a one-token window
# copied in float32 on CPU, but M=1 and M=5 products round differently on a GPU and flipped its near-ties).
COPYING = {"llama-8b-copy", "llama-tiny-copy"}
SHAPES["llama-8b-copy"] = SHAPES["llama-8b"]
SHAPES["llama-tiny-copy"] = dict(SHAPES["llama-tiny"], tie_word_embeddings=False)


def _copying(model) -> None:
    inner = model.model
    with torch.no_grad():
        for layer in inner.layers:
            layer.self_attn.o_proj.weight.mul_(1e-3)
            layer.mlp.down_proj.weight.mul_(1e-3)
        embeddings = inner.embed_tokens.weight
        order = torch.randperm(embeddings.shape[0], generator=torch.Generator().manual_seed(1))
        model.lm_head.weight.copy_(embeddings[order.to(embeddings.device)])


def shape_config(shape: str, max_len: int = 131072):
    """The transformers config of a random-weight shape (SHAPES: Llama 3.x; FAMILY_SHAPES: its family)."""
    if shape in FAMILY_SHAPES:
        settings = dict(FAMILY_SHAPES[shape])
        config = AutoConfig.for_model(settings.pop("model_type"), **settings, max_position_embeddings=max_len)
        config.architectures = [AutoModelForCausalLM._model_mapping[type(config)].__name__]
        return config
    defaults = dict(vocab_size=128256, bos_token_id=128000, eos_token_id=128001)
    return LlamaConfig(
        **{**defaults, **SHAPES[shape]},
        max_position_embeddings=max_len,
        rms_norm_eps=1e-5,
        rope_parameters=dict(LLAMA3_ROPE),
        architectures=["LlamaForCausalLM"],
    )


def shape_vocab(shape: str) -> int:
    if shape == "default":
        from transformers import AutoConfig

        from scaleout_common.models import resolve_model

        return AutoConfig.from_pretrained(resolve_model(None)).vocab_size
    return {**SHAPES, **FAMILY_SHAPES}[shape].get("vocab_size", 128256)


def build_model(shape: str, device: str, dtype: torch.dtype, max_len: int = 131072):
    """The default model from its folder, or a model of `shape` with seeded random weights."""
    if shape == "default":
        from scaleout_common.models import resolve_model

        return AutoModelForCausalLM.from_pretrained(resolve_model(None), dtype=dtype).to(device).eval()
    config = shape_config(shape, max_len)
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config)
    finally:
        torch.set_default_dtype(previous)
    if shape in COPYING:
        _copying(model)
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
