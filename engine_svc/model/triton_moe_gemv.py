"""One token's experts as two GEMV launches (CUDA): a batch-1 decode step's mixture, which reads its k experts'
weights once and has no rows to share a tensor-core tile. The gate_up launch takes a program per (choice, BLOCK_N
inner columns) and writes the gated row (SwiGLU or gpt-oss's clamped variant, after the bias and the fp8 row
scales), the down launch a program per BLOCK_N output columns that runs over the k choices and sums their
weighted products itself: no intermediate of k rows and no reduction launch after. Rounded as the tiled path
(triton_moe.py) rounds: the gate_up's products to the activations' dtype before gating, each choice's weighted
product before the sum. On the H100 the tiled one-token path ran the Qwen3-30B-A3B shape's experts at 56% of the
copy bandwidth (45 us a layer with its reduction); tiles: triton_linear's GEMV configurations, autotuned."""
# pyright: reportArgumentType=false, reportCallIssue=false, reportOperatorIssue=false, reportIndexIssue=false
# pyright: reportGeneralTypeIssues=false

from __future__ import annotations

import torch
import triton  # pyright: ignore[reportMissingImports]
import triton.language as tl  # pyright: ignore[reportMissingImports]

from engine_svc.model.triton_linear import GEMV_CONFIGS
from engine_svc.model.triton_pdl import pdl, wait_for_inputs

CONFIGS = GEMV_CONFIGS if torch.cuda.is_available() else GEMV_CONFIGS[3:4]  # Triton's interpreter cannot time


@triton.autotune(configs=CONFIGS, key=["inner", "hidden", "W_FP8", "BIAS", "GATING"])
@triton.jit
def _gate_up(x_ptr, w_ptr, bias_ptr, w_scale_ptr, ids_ptr, h_ptr, inner, hidden, stride_we, stride_wn, stride_bias,
             stride_ws, alpha, limit, W_FP8: tl.constexpr, BIAS: tl.constexpr, GATING: tl.constexpr,
             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr):  # fmt: skip
    """h[choice, cols] = gating(gate rows . x, up rows . x) of the choice's expert (w: [experts, gate | up,
    hidden])."""
    wait_for_inputs(PDL)
    choice = tl.program_id(0)
    expert = tl.load(ids_ptr + choice).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    gate_rows = w_ptr + expert * stride_we + cols[:, None] * stride_wn
    gate = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    up = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for start in range(0, hidden, BLOCK_K):
        k = start + ks
        x = tl.load(x_ptr + k, mask=k < hidden, other=0.0).to(tl.float32)
        where = (cols[:, None] < inner) & (k[None, :] < hidden)
        gate += tl.load(gate_rows + k[None, :], mask=where, other=0.0).to(tl.float32) * x[None, :]
        up += tl.load(gate_rows + inner * stride_wn + k[None, :], mask=where, other=0.0).to(tl.float32) * x[None, :]
    g, u, on = tl.sum(gate, axis=1), tl.sum(up, axis=1), cols < inner
    if W_FP8:
        g *= tl.load(w_scale_ptr + expert * stride_ws + cols, mask=on, other=0.0)
        u *= tl.load(w_scale_ptr + expert * stride_ws + inner + cols, mask=on, other=0.0)
    if BIAS:
        g += tl.load(bias_ptr + expert * stride_bias + cols, mask=on, other=0.0).to(tl.float32)
        u += tl.load(bias_ptr + expert * stride_bias + inner + cols, mask=on, other=0.0).to(tl.float32)
    dtype = h_ptr.dtype.element_ty
    g, u = g.to(dtype).to(tl.float32), u.to(dtype).to(tl.float32)
    if GATING == 2:
        g, u = tl.minimum(g, limit), tl.minimum(tl.maximum(u, -limit), limit)
        a = (u + 1.0) * g * tl.sigmoid(g * alpha)
    else:
        a = g * tl.sigmoid(g) * u
    tl.store(h_ptr + choice * inner + cols, a.to(dtype), mask=on)


@triton.autotune(configs=CONFIGS, key=["hidden", "INNER", "TOP_K", "W_FP8", "BIAS"])
@triton.jit
def _down(h_ptr, w_ptr, bias_ptr, w_scale_ptr, ids_ptr, weights_ptr, out_ptr, hidden, stride_we, stride_wn,
          stride_bias, stride_ws, INNER: tl.constexpr, TOP_K: tl.constexpr, W_FP8: tl.constexpr,
          BIAS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr):  # fmt: skip
    """out[cols] = sum over the k choices of weight * (down rows of the choice's expert . h[choice]). Unrolled
    whole (the inner size is a constant): every choice's loads can be in flight at once, where a loop over the
    inner blocks made each choice wait for the last."""
    wait_for_inputs(PDL)
    inner = INNER
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    on = cols < hidden
    dtype = out_ptr.dtype.element_ty
    total = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for choice in tl.static_range(TOP_K):
        expert = tl.load(ids_ptr + choice).to(tl.int64)
        rows = w_ptr + expert * stride_we + cols[:, None] * stride_wn
        acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        for start in tl.static_range(0, INNER, BLOCK_K):
            k = start + ks
            h = tl.load(h_ptr + choice * inner + k, mask=k < inner, other=0.0).to(tl.float32)
            where = on[:, None] & (k[None, :] < inner)
            acc += tl.load(rows + k[None, :], mask=where, other=0.0).to(tl.float32) * h[None, :]
        product = tl.sum(acc, axis=1)
        if W_FP8:
            product *= tl.load(w_scale_ptr + expert * stride_ws + cols, mask=on, other=0.0)
        if BIAS:
            product += tl.load(bias_ptr + expert * stride_bias + cols, mask=on, other=0.0).to(tl.float32)
        total += (product * tl.load(weights_ptr + choice).to(tl.float32)).to(dtype).to(tl.float32)
    tl.store(out_ptr + cols, total.to(dtype), mask=on)


def one_token_experts(x, gate_up, down, weights, ids, gating, gate_up_bias, down_bias, gate_up_scale, down_scale):
    """triton_moe.fused_experts for x [1, hidden] with bf16/float or fp8 (row-scaled) experts: [1, hidden]."""
    top_k, inner, hidden = ids.shape[1], down.shape[2], down.shape[1]
    ids, weights, x = ids.flatten().contiguous(), weights.flatten().contiguous(), x.contiguous()
    h = x.new_empty(top_k, inner)
    fp8, biased = gate_up_scale is not None, gate_up_bias is not None
    _gate_up[lambda meta: (top_k, triton.cdiv(inner, meta["BLOCK_N"]))](  # pyright: ignore[reportIndexIssue]
        x, gate_up, gate_up_bias if biased else x, gate_up_scale if fp8 else x, ids, h, inner, hidden,
        gate_up.stride(0), gate_up.stride(1), gate_up_bias.stride(0) if biased else 0,
        gate_up_scale.stride(0) if fp8 else 0, gating.alpha, gating.limit or 0.0, W_FP8=fp8, BIAS=biased,
        GATING=2 if gating.limit else 1, **pdl(),
    )  # fmt: skip
    out = x.new_empty(1, hidden)
    _down[lambda meta: (triton.cdiv(hidden, meta["BLOCK_N"]),)](  # pyright: ignore[reportIndexIssue]
        h, down, down_bias if biased else x, down_scale if fp8 else x, ids, weights, out, hidden,
        down.stride(0), down.stride(1), down_bias.stride(0) if biased else 0, down_scale.stride(0) if fp8 else 0,
        INNER=inner, TOP_K=top_k, W_FP8=fp8, BIAS=biased, **pdl(),
    )  # fmt: skip
    return out


def handles(gate_up: torch.Tensor, gate_up_bias, down_bias) -> bool:
    """Whether one_token_experts serves these experts: not MXFP4's packed bytes (the tiled path widens those),
    and biases on both products or neither."""
    return gate_up.dtype != torch.uint8 and (gate_up_bias is None) == (down_bias is None)
