"""moe.py's routing rules in one Triton launch each (CUDA): from a token's router logits to its k experts and
their weights, where the torch rules take five (softmax, top-k) to sixteen (GLM-4.5's and DeepSeek V3's grouped
sigmoid) small launches a layer, the floor of a batch-1 decode step. `route` in moe.py is the reference."""
# pyright: reportArgumentType=false, reportCallIssue=false, reportOperatorIssue=false, reportIndexIssue=false
# pyright: reportGeneralTypeIssues=false
# (Triton's stubs type kernel parameters as tl.constexpr and static_range narrowly; kernels pass plain values.)

from __future__ import annotations

import torch
import triton  # pyright: ignore[reportMissingImports]
import triton.language as tl  # pyright: ignore[reportMissingImports]

from engine_svc.model.triton_pdl import pdl, wait_for_inputs

RULES = {"softmax": 0, "softmax_top_k": 1, "sigmoid_groups": 2}


@triton.jit
def _lowest(values, where, size: tl.constexpr):
    """The lowest position holding the largest of `values` (ties, and NaN: some position, never out of range)."""
    best = tl.max(values, 0)
    return tl.minimum(tl.min(tl.where(values == best, where, size), 0), size - 1), best


@triton.jit
def _route(logits_ptr, correction_ptr, weights_ptr, ids_ptr, experts, per_group, stride, scale,
           TOP_K: tl.constexpr, RULE: tl.constexpr, RENORMALIZE: tl.constexpr, CORRECTION: tl.constexpr,
           GROUPS: tl.constexpr, TOP_GROUPS: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr,
           BLOCK_G: tl.constexpr, PDL: tl.constexpr):  # fmt: skip
    """One token (float32 inside). RULE 0, Qwen3 MoE: the top k of the softmax over every expert (renormalised
    where RENORMALIZE); 1, gpt-oss: the softmax over the top k logits; 2, GLM-4.5 / DeepSeek V3: sigmoid scores,
    chosen by score + correction within the TOP_GROUPS of GROUPS groups whose two best choices sum highest,
    weighted by the scores (renormalised where RENORMALIZE) times `scale`."""
    wait_for_inputs(PDL)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_E)
    real = cols < experts
    logits = tl.load(logits_ptr + row * stride + cols, mask=real, other=float("-inf")).to(tl.float32)
    if RULE == 0:
        scores = tl.exp(logits - tl.max(logits, 0))
        scores = scores / tl.sum(scores, 0)
    elif RULE == 1:
        scores = logits
    else:
        scores = tl.sigmoid(logits)
    choice = scores
    if CORRECTION:
        choice = choice + tl.load(correction_ptr + cols, mask=real, other=0.0).to(tl.float32)
    choice = tl.where(real, choice, float("-inf"))
    if TOP_GROUPS < GROUPS:  # the other groups' experts are out of the choice
        group = cols // per_group
        slots = tl.arange(0, BLOCK_G)
        sums = tl.full([BLOCK_G], float("-inf"), tl.float32)
        for g in tl.static_range(GROUPS):
            mine = tl.where(group == g, choice, float("-inf"))
            at, first = _lowest(mine, cols, BLOCK_E)
            sums = tl.where(slots == g, first + tl.max(tl.where(cols == at, float("-inf"), mine), 0), sums)
        keep = cols < 0
        for _ in tl.static_range(TOP_GROUPS):
            at, _best = _lowest(sums, slots, BLOCK_G)
            keep = keep | (group == at)
            sums = tl.where(slots == at, float("-inf"), sums)
        choice = tl.where(keep, choice, float("-inf"))
    k = tl.arange(0, BLOCK_K)
    values = tl.zeros([BLOCK_K], tl.float32)
    ids = tl.zeros([BLOCK_K], tl.int64)
    for j in tl.static_range(TOP_K):
        at, best = _lowest(choice, cols, BLOCK_E)
        if RULE == 2 or CORRECTION:  # chosen by another value than the score: gather the score
            best = tl.sum(tl.where(cols == at, scores, 0.0), 0)
        values = tl.where(k == j, best, values)
        ids = tl.where(k == j, at.to(tl.int64), ids)
        choice = tl.where(cols == at, float("-inf"), choice)
    used = k < TOP_K
    if RULE == 1:
        values = tl.where(used, tl.exp(values - tl.max(tl.where(used, values, float("-inf")), 0)), 0.0)
        values = values / tl.sum(values, 0)
    elif RENORMALIZE:
        total = tl.sum(tl.where(used, values, 0.0), 0)
        if RULE == 2:
            total = total + 1e-20  # as the torch rule
        values = values / total
    if RULE == 2:
        values = values * scale
    tl.store(weights_ptr + row * TOP_K + k, values.to(weights_ptr.dtype.element_ty), mask=used)
    tl.store(ids_ptr + row * TOP_K + k, ids, mask=used)


def routed(logits: torch.Tensor, routing, correction: torch.Tensor | None, dtype: torch.dtype):
    """(weights [tokens, k] in `dtype`, expert ids [tokens, k]) of each token's router logits under `routing`
    (moe.py's Routing), in one launch; `correction`: GLM-4.5's / DeepSeek V3's choice bias, or None."""
    tokens, experts = logits.shape
    weights = torch.empty(tokens, routing.top_k, dtype=dtype, device=logits.device)
    ids = torch.empty(tokens, routing.top_k, dtype=torch.int64, device=logits.device)
    _route[(tokens,)](  # pyright: ignore[reportIndexIssue]
        logits, logits if correction is None else correction, weights, ids, experts, experts // routing.groups,
        logits.stride(0), routing.scale, TOP_K=routing.top_k, RULE=RULES[routing.rule],
        RENORMALIZE=routing.renormalize, CORRECTION=correction is not None, GROUPS=routing.groups,
        TOP_GROUPS=routing.top_groups, BLOCK_E=triton.next_power_of_2(experts),
        BLOCK_K=triton.next_power_of_2(routing.top_k), BLOCK_G=triton.next_power_of_2(routing.groups),
        num_warps=1,  # a token's few hundred experts: reductions within one warp, no shared-memory round trips
        **pdl(),
    )  # fmt: skip
    return weights, ids
