"""Our decoder over a paged KV cache: fused qkv and gate_up projections, RMSNorm, RoPE, grown per family by
the settings of family.py (q/k norms, sandwich norms, GeGLU, sliding windows, soft-caps, mixture of experts)
and partial rotary embeddings (the rotary module's own width: GLM-4.5); DeepSeek V3's latent attention
(mla.py) feeds the same fused qkv rows to the attention.

Weights come from the transformers model (which handles config and loading); `FusedDecoder.from_hf` takes
them into fused modules. The forward works on a flat batch of tokens (decodes first, then prefill chunks)
and computes logits only for the rows named in `logits_rows`.
"""

from __future__ import annotations

from typing import Protocol, cast

import torch
from torch import nn

from engine_svc.model.attention import AttentionBackend, AttentionMetadata, QkNorm
from engine_svc.model.family import FAST_PATH_ARCHITECTURES, Family, fast_path_problem
from engine_svc.model.mla import Mla, is_mla, mla_width
from engine_svc.model.moe import SparseMoe
from engine_svc.model.rope import head_rows, inv_freq, rope_table, rotary_order

__all__ = ["FAST_PATH_ARCHITECTURES", "FusedDecoder", "head_dim", "supports_fast_path"]


class RMSNorm(nn.Module):
    """`offset`: the norm scales by offset + weight (Gemma's 1 + weight), folded into the weight here."""

    def __init__(self, weight: torch.Tensor, eps: float, offset: float = 0.0):
        super().__init__()
        folded = (weight.detach().float() + offset).to(weight.dtype) if offset else weight.detach().clone()
        self.weight = nn.Parameter(folded, requires_grad=False)
        self.eps = eps


class Projection(Protocol):
    """What a NormedProjection projects with: an nn.Linear, the VocabHead or a skinny-kernel linear."""

    @property
    def weight(self) -> torch.Tensor: ...

    @property
    def bias(self) -> torch.Tensor | None: ...

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...


class PartialSums(tuple):
    """A projection's output as two terms not yet added (fp8_linear's products split over their inner dimension):
    the residual add after the projection adds them too, one kernel instead of two."""


def whole(x: torch.Tensor | PartialSums) -> torch.Tensor:
    """x, its terms added where it is a PartialSums."""
    return x[0] + x[1] if isinstance(x, PartialSums) else x


class NormedProjection(nn.Module):
    """A projection of rms_norm(x + residual), returned with x + residual (the next residual; x itself when
    residual is None). `gated`: the projection is [gate; up] and the result silu(gate) * up."""

    def __init__(self, norm: RMSNorm, linear: Projection, gated: bool = False):
        super().__init__()
        self.norm, self.linear, self.gated = norm, linear, gated

    def forward(self, x: torch.Tensor | PartialSums, residual: torch.Tensor | None, ops):
        x = whole(x)  # an fp8 o_proj's output before a projection that is not fp8 (GeGLU's, the experts')
        if residual is None:
            h, residual = ops.rms_norm(x, self.norm.weight, self.norm.eps), x
        else:
            h, residual = ops.add_rms_norm(x, residual, self.norm.weight, self.norm.eps)
        out = self.linear(h)
        return (ops.silu_mul(out) if self.gated else out), residual


class VocabHead(nn.Module):
    """The vocabulary projection. On CPU, MKL runs the tall vocab matrix faster as weight @ x^T below 16 rows and
    as x @ weight^T from 16 rows on (SmolLM2's 49152 x 576 head on a 2-core machine, weight @ x^T against
    x @ weight^T: 8 rows 8.1 against 10.3 ms, 12 rows 8.7 against 15.2, 64 rows 25.2 against 15.6)."""

    TRANSPOSED_BELOW_ROWS = 16

    def __init__(self, lm_head: nn.Linear):
        super().__init__()
        self.weight, self.bias = lm_head.weight, lm_head.bias  # the weight is the embedding's when tied

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.weight.dtype)  # a float32 head (head_dtype.py) takes the hidden state cast up
        if x.is_cuda or self.bias is not None or x.shape[0] >= self.TRANSPOSED_BELOW_ROWS:
            return nn.functional.linear(x, self.weight, self.bias)
        return torch.mm(self.weight, x.t()).t().contiguous()


class SplitGateUp(nn.Module):
    """A fused [gate; up] projection run as two matmuls over its halves, SwiGLU applied: silu(gate) * up. On CPU,
    MKL takes a few rows through two 1536-wide matrices faster than through one 3072-wide (the default model's
    30 layers: 16.1 against 20.5 ms at 8 rows, 34.6 against 37.7 at 64; the same at 2048)."""

    def __init__(self, fused: Projection):
        super().__init__()
        self.weight, self.bias = fused.weight, fused.bias
        self.width = self.weight.shape[0] // 2  # of each half

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_bias, up_bias = (None, None) if self.bias is None else self.bias.split(self.width)
        gate = nn.functional.linear(x, self.weight[: self.width], gate_bias)
        return nn.functional.silu(gate).mul_(nn.functional.linear(x, self.weight[self.width :], up_bias))


def _fused_linear(*linears: nn.Linear) -> nn.Linear:
    weight = torch.cat([lin.weight.detach() for lin in linears], 0)
    has_bias = linears[0].bias is not None
    fused = nn.Linear(weight.shape[1], weight.shape[0], bias=has_bias, device=weight.device, dtype=weight.dtype)
    fused.weight = nn.Parameter(weight, requires_grad=False)
    if has_bias:
        fused.bias = nn.Parameter(torch.cat([lin.bias.detach() for lin in linears], 0), requires_grad=False)
    return fused


class GeluGateUp(nn.Module):
    """A fused [gate; up] projection with GeGLU applied: gelu_tanh(gate) * up (Gemma's MLP)."""

    def __init__(self, fused: Projection):
        super().__init__()
        self.fused = fused
        self.weight, self.bias = fused.weight, fused.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = whole(self.fused(x)).chunk(2, dim=-1)
        return nn.functional.gelu(gate, approximate="tanh") * up


class DecoderLayer(nn.Module):
    def __init__(self, hf_layer, config, layer_index: int, family: Family, rotary_dim: int):
        super().__init__()
        attn, mlp = hf_layer.self_attn, hf_layer.mlp
        self.num_heads = config.num_attention_heads
        mla = is_mla(config)  # DeepSeek V3's latent attention, its K/V expanded per head (mla.py)
        self.num_kv_heads = self.num_heads if mla else config.num_key_value_heads
        self.head_dim = head_dim(config)
        # Partial rotary: each q and k head's dims in this order, not the checkpoint's (None: as loaded).
        self.head_order = order = rotary_order(self.head_dim, rotary_dim)
        self.layer_index = layer_index
        self.window = family.windows[layer_index]
        self.rope_index = sorted(set(family.rope_kinds)).index(family.rope_kinds[layer_index])
        norm = lambda module, rows=None: RMSNorm(  # noqa: E731
            module.weight if rows is None else module.weight[rows.to(module.weight.device)],
            config.rms_norm_eps,
            family.norm_offset,
        )
        normed = lambda n, linear: NormedProjection(RMSNorm(n.weight, n.variance_epsilon), linear)  # noqa: E731
        self.mla = Mla(attn, config, self.head_dim, normed) if mla else None
        if self.mla is not None:
            first = self.mla.first
        else:
            first = _fused_linear(head_rows(attn.q_proj, order), head_rows(attn.k_proj, order), attn.v_proj)
        self.qkv = NormedProjection(norm(hf_layer.input_layernorm), first)
        # Qwen3, Gemma 3, GLM-4.5 with use_qk_norm: each q and k head RMS-normed before RoPE.
        self.q_norm = norm(attn.q_norm, order) if hasattr(attn, "q_norm") else None
        self.k_norm = norm(attn.k_norm, order) if hasattr(attn, "k_norm") else None
        self.o_proj = attn.o_proj
        self.sinks = attn.sinks.detach() if hasattr(attn, "sinks") else None  # gpt-oss: [heads] sink logits
        pre_mlp = hf_layer.pre_feedforward_layernorm if family.sandwich else hf_layer.post_attention_layernorm
        self.post_attention_norm = norm(hf_layer.post_attention_layernorm) if family.sandwich else None
        self.post_mlp_norm = norm(hf_layer.post_feedforward_layernorm) if family.sandwich else None
        if hasattr(mlp, "experts"):
            self.mlp_kind = "moe"
            self.gate_up, self.down = NormedProjection(norm(pre_mlp), SparseMoe(mlp, config)), nn.Identity()
        else:
            self.mlp_kind = family.activation
            fused = _fused_linear(mlp.gate_proj, mlp.up_proj)
            silu = self.mlp_kind == "silu"
            self.gate_up = NormedProjection(norm(pre_mlp), fused if silu else GeluGateUp(fused), gated=silu)
            self.down = mlp.down_proj
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim

    def forward(self, x, residual, cos, sin, kv_cache, meta: AttentionMetadata, backend: AttentionBackend, ops):
        """(output, residual): each residual add is fused into the norm of the projection that follows it."""
        q, kv, residual = self.before_attention(x, residual, cos, sin, kv_cache, meta, backend, ops)
        attn = backend.forward(q, kv, kv_cache, meta, window=self.window, sinks=self.sinks)
        return self.after_attention(attn, residual, ops)

    def before_attention(self, x, residual, cos, sin, kv_cache, meta: AttentionMetadata, backend, ops):
        """(q, kv, residual): the normed qkv projection, rotated (by this layer's table of the RoPE tables `cos`
        and `sin`), this step's K/V written to the cache."""
        qkv, residual = self.qkv(x, residual, ops)
        if self.mla is not None:
            qkv = self.mla(whole(qkv), ops)
        qk_norm = None
        if self.q_norm is not None and self.k_norm is not None:
            qk_norm = QkNorm(self.q_norm.weight, self.k_norm.weight, self.q_norm.eps)
        q, kv = backend.store(qkv, cos[self.rope_index], sin[self.rope_index], kv_cache, meta, ops, qk_norm)
        return q, kv, residual

    def after_attention(self, attn: torch.Tensor, residual: torch.Tensor, ops):
        """(output, residual) from the attention's output: o_proj, then the MLP (each normed after, sandwich)."""
        rows = attn.reshape(attn.shape[0], self.q_size) if self.mla is None else self.mla.output(attn)
        out = self.o_proj(rows)
        if self.post_attention_norm is not None:
            out = ops.rms_norm(whole(out), self.post_attention_norm.weight, self.post_attention_norm.eps)
        mlp_in, residual = self.gate_up(out, residual, ops)
        out = self.down(mlp_in)
        if self.post_mlp_norm is not None:
            out = ops.rms_norm(whole(out), self.post_mlp_norm.weight, self.post_mlp_norm.eps)
        return out, residual


class FusedDecoder(nn.Module):
    cos: torch.Tensor  # [RoPE tables, max_model_len, head_dim] buffers, registered below
    sin: torch.Tensor

    def __init__(self, hf_model, max_model_len: int, ops, consume: bool = False):
        """`consume`: nothing else uses `hf_model`: each of its decoder layers leaves it once fused, so loading
        holds one layer's unfused weights beside the fused model, not all of them."""
        super().__init__()
        self.ops = ops
        config = hf_model.config
        inner = hf_model.model
        self.config = config
        self.family = family = Family.of(config)
        self.embed = inner.embed_tokens
        # Gemma's embeddings are scaled: by the embedding module itself in recent transformers, else here.
        self.embed_scale = 0.0 if hasattr(self.embed, "embed_scale") else family.embed_scale
        rotary = inner.rotary_emb
        kinds = sorted(set(family.rope_kinds))
        rotary_dims = {kind: 2 * inv_freq(rotary, kind).numel() for kind in kinds}
        self.layers = nn.ModuleList()
        for i in range(len(inner.layers)):
            self.layers.append(DecoderLayer(inner.layers[i], config, i, family, rotary_dims[family.rope_kinds[i]]))
            if consume:
                inner.layers[i] = nn.Identity()
        final_norm = RMSNorm(inner.norm.weight, config.rms_norm_eps, family.norm_offset)
        self.head = NormedProjection(final_norm, VocabHead(hf_model.lm_head))
        self.max_model_len = max_model_len
        dtype = self.embed.weight.dtype
        tables = [rope_table(rotary, kind, max_model_len, head_dim(config)) for kind in kinds]
        self.register_buffer("cos", torch.stack([c for c, _ in tables]).to(dtype), persistent=False)
        self.register_buffer("sin", torch.stack([s for _, s in tables]).to(dtype), persistent=False)

    def use_skinny_kernels(self, linear, normed, normed_router) -> None:
        """Replace each bias-free plain projection by linear(projection) and each bias-free normed one (the
        vocabulary head's included) by normed(norm, projection, gated), and a mixture's norm with its bias-free
        softmax router by normed_router(norm, experts); fp8 projections stay as they are."""
        for layer in self.layers:
            mixture = cast(NormedProjection, layer.gate_up)
            if isinstance(mixture.linear, SparseMoe) and _routes_plainly(mixture.linear):
                layer.gate_up = normed_router(mixture.norm, mixture.linear)
            silu = layer.mlp_kind == "silu"  # GeGLU and the experts keep their own forward
            for name in ("o_proj", "down") if layer.mlp_kind != "moe" else ("o_proj",):
                if _plain(getattr(layer, name)):
                    setattr(layer, name, linear(getattr(layer, name)))
            for name in ("qkv", "gate_up") if silu else ("qkv",):
                part = getattr(layer, name)
                if _plain(part.linear):
                    setattr(layer, name, normed(part.norm, part.linear, part.gated))
            if (mla := cast(DecoderLayer, layer).mla) is not None:
                mla.convert(lambda part: normed(part.norm, part.linear, part.gated) if _plain(part.linear) else part)
        if self.head.linear.bias is None and self.head.linear.weight.dtype == self.embed.weight.dtype:
            self.head = normed(self.head.norm, self.head.linear)  # a float32 head (head_dtype.py) stays in torch

    def quantize_projections(self, linear, normed) -> None:
        """Each layer's plain projections as linear(projection), its normed ones as normed(norm, linear(projection),
        gated) (the vocabulary head keeps the model's dtype); the experts of a mixture in e4m3 (SparseMoe.to_fp8);
        a GeGLU's fused [gate; up] as linear(projection) inside it (its activations quantized by the product, not
        fused into the norm)."""
        for layer in cast(list[DecoderLayer], list(self.layers)):  # ModuleList's items are typed as Module
            layer.o_proj = linear(layer.o_proj)
            mlp = cast(NormedProjection, layer.gate_up).linear
            if layer.mlp_kind != "moe":
                layer.down = linear(layer.down)
            else:
                cast(SparseMoe, mlp).to_fp8()
            if isinstance(mlp, GeluGateUp):
                mlp.fused = linear(mlp.fused)
                mlp.weight, mlp.bias = mlp.fused.weight, mlp.fused.bias
            for name in ("qkv", "gate_up") if layer.mlp_kind == "silu" else ("qkv",):
                part = getattr(layer, name)
                setattr(layer, name, normed(part.norm, linear(part.linear), part.gated))
            if layer.mla is not None:
                layer.mla.convert(lambda part: normed(part.norm, linear(part.linear), part.gated))

    def experts_to_mxfp4(self) -> None:
        """Each mixture layer's experts in MXFP4 (SparseMoe.to_mxfp4); attention and the router keep their dtype."""
        for layer in cast(list[DecoderLayer], list(self.layers)):
            if layer.mlp_kind == "moe":
                cast(SparseMoe, cast(NormedProjection, layer.gate_up).linear).to_mxfp4()

    def split_gate_up(self) -> None:
        """Each layer's gate_up as two matmuls (SplitGateUp: faster on CPU), its SwiGLU with them."""
        for layer in cast(list[DecoderLayer], list(self.layers)):
            if layer.mlp_kind == "silu":
                part = cast(NormedProjection, layer.gate_up)
                layer.gate_up = NormedProjection(part.norm, SplitGateUp(part.linear))

    @property
    def layer0(self) -> DecoderLayer:
        return cast(DecoderLayer, self.layers[0])  # ModuleList's items are typed as Module

    def forward(self, input_ids, positions, meta: AttentionMetadata, kv_caches, backend, logits_rows=None, ops=None):
        """`ops`: the elementwise functions to use (default: the model's, compiled on CUDA)."""
        ops = ops or self.ops
        backend.prepare(meta)
        if meta.windowed is not None:
            backend.prepare(meta.windowed)
        x, residual = self.embed_tokens(input_ids), None
        cos, sin = self.rope(positions)
        for layer, kv_cache, window in zip(self.layers, kv_caches, self.family.windows):
            x, residual = layer(x, residual, cos, sin, kv_cache, meta.for_window(window), backend, ops)
        assert residual is not None  # set by the first layer, and every decoder has one
        return self.logits(x, residual, logits_rows, ops)

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids)
        scale = self.embed_scale  # in the model's dtype, as transformers multiplies
        return x * torch.tensor(scale, dtype=x.dtype, device=x.device) if scale else x

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin [RoPE tables, tokens, 1, head_dim] of the tokens at `positions`."""
        return self.cos[:, positions].unsqueeze(2), self.sin[:, positions].unsqueeze(2)

    def logits(self, x, residual, logits_rows, ops) -> torch.Tensor:
        """The vocabulary head over the last layer's output rows `logits_rows` (None: every row)."""
        x = whole(x)
        if logits_rows is not None:
            if logits_rows.shape[0] == 0:  # no row samples this step (and no empty-shape kernel compiles)
                return x.new_empty((0, self.head.linear.weight.shape[0]))
            x, residual = x[logits_rows], residual[logits_rows]
        logits = self.head(x, residual, ops)[0]
        cap = self.family.final_softcap
        return torch.tanh(logits / cap) * cap if cap else logits


def _routes_plainly(experts: SparseMoe) -> bool:
    """A router the skinny kernel computes: bias-free, in the activations' dtype (not GLM-4.5's float32 scores)."""
    return experts.router_bias is None and experts.routing.rule != "sigmoid_groups" and _plain(experts)


def _plain(projection) -> bool:
    """A bias-free projection in a dtype the skinny kernels read (not fp8's one byte)."""
    return projection.bias is None and projection.weight.itemsize > 1


def head_dim(config) -> int:
    """Each attention head's width: the config's own, or the hidden size split over the heads (MLA: a cached
    K/V head's, mla.py)."""
    if is_mla(config):
        return mla_width(config)
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def supports_fast_path(config) -> bool:
    return fast_path_problem(config) is None
