"""Our Llama/Qwen-family decoder over a paged KV cache: fused qkv and gate_up projections, RMSNorm, RoPE.

Weights come from the transformers model (which handles config and loading); `FusedDecoder.from_hf` takes
them into fused modules. The forward works on a flat batch of tokens (decodes first, then prefill chunks)
and computes logits only for the rows named in `logits_rows`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine_svc.attention import AttentionBackend, AttentionMetadata

FAST_PATH_ARCHITECTURES = {"LlamaForCausalLM", "Qwen2ForCausalLM"}


class RMSNorm(nn.Module):
    def __init__(self, weight: torch.Tensor, eps: float):
        super().__init__()
        self.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def _fused_linear(*linears: nn.Linear) -> nn.Linear:
    weight = torch.cat([lin.weight.detach() for lin in linears], 0)
    has_bias = linears[0].bias is not None
    fused = nn.Linear(weight.shape[1], weight.shape[0], bias=has_bias, device=weight.device, dtype=weight.dtype)
    fused.weight = nn.Parameter(weight, requires_grad=False)
    if has_bias:
        fused.bias = nn.Parameter(torch.cat([lin.bias.detach() for lin in linears], 0), requires_grad=False)
    return fused


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class DecoderLayer(nn.Module):
    def __init__(self, hf_layer, config, layer_index: int):
        super().__init__()
        attn, mlp = hf_layer.self_attn, hf_layer.mlp
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.num_heads
        self.layer_index = layer_index
        self.input_norm = RMSNorm(hf_layer.input_layernorm.weight, config.rms_norm_eps)
        self.post_attention_norm = RMSNorm(hf_layer.post_attention_layernorm.weight, config.rms_norm_eps)
        self.qkv = _fused_linear(attn.q_proj, attn.k_proj, attn.v_proj)
        self.o_proj = attn.o_proj
        self.gate_up = _fused_linear(mlp.gate_proj, mlp.up_proj)
        self.down = mlp.down_proj
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim

    def forward(self, x, cos, sin, kv_cache, meta: AttentionMetadata, backend: AttentionBackend):
        h = self.input_norm(x)
        q, k, v = self.qkv(h).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        tokens = x.shape[0]
        q = q.view(tokens, self.num_heads, self.head_dim)
        k = k.view(tokens, self.num_kv_heads, self.head_dim)
        v = v.view(tokens, self.num_kv_heads, self.head_dim)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        k_cache, v_cache = kv_cache
        k_cache.index_copy_(0, meta.slot_mapping, k)
        v_cache.index_copy_(0, meta.slot_mapping, v)
        attn = backend.forward(q, k, v, k_cache, v_cache, meta)
        x = x + self.o_proj(attn.reshape(tokens, self.q_size))
        gate, up = self.gate_up(self.post_attention_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class FusedDecoder(nn.Module):
    def __init__(self, hf_model, max_model_len: int):
        super().__init__()
        config = hf_model.config
        inner = hf_model.model
        self.config = config
        self.embed = inner.embed_tokens
        self.layers = nn.ModuleList(DecoderLayer(layer, config, i) for i, layer in enumerate(inner.layers))
        self.norm = RMSNorm(inner.norm.weight, config.rms_norm_eps)
        self.lm_head = hf_model.lm_head  # shares the embedding when the model ties them
        rotary = inner.rotary_emb
        positions = torch.arange(max_model_len, dtype=torch.float32, device=rotary.inv_freq.device)
        freqs = positions[:, None] * rotary.inv_freq.float()[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        dtype = self.embed.weight.dtype
        self.register_buffer("cos", (emb.cos() * rotary.attention_scaling).to(dtype), persistent=False)
        self.register_buffer("sin", (emb.sin() * rotary.attention_scaling).to(dtype), persistent=False)

    @property
    def layer0(self) -> DecoderLayer:
        return self.layers[0]

    @torch.inference_mode()
    def forward(self, input_ids, positions, meta: AttentionMetadata, kv_caches, backend, logits_rows=None):
        backend.prepare(meta)
        x = self.embed(input_ids)
        cos = self.cos[positions].unsqueeze(1)
        sin = self.sin[positions].unsqueeze(1)
        for layer, kv_cache in zip(self.layers, kv_caches):
            x = layer(x, cos, sin, kv_cache, meta, backend)
        if logits_rows is not None:
            x = x[logits_rows]
        return self.lm_head(self.norm(x))


def supports_fast_path(config) -> bool:
    archs = set(getattr(config, "architectures", None) or [])
    return bool(archs & FAST_PATH_ARCHITECTURES) and getattr(config, "hidden_act", "silu") == "silu"
