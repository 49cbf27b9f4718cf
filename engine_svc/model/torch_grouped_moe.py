"""A mixture's experts through torch's grouped GEMM (`torch._grouped_mm`: CUTLASS on CUDA, bf16) for steps of
many tokens, where the Triton grouped GEMM (triton_moe.py) reached ~42% of the tensor cores' rate on Qwen3-30B-A3B's
prefill (334 of 789 TFLOP/s at 8,192 tokens on the H200).

Each token's k choices are sorted by expert (no host read: the group ends go to the kernel as a device tensor),
the token rows gathered once, gate_up and down run as one grouped GEMM each with the gating between them, each
product scaled by its routing weight and put back in assignment order, and a token's k products summed: the
rounding of the Triton path (each weighted product in the activations' dtype before the sum), deterministic.

`GroupedMmChooser` runs both paths once per (shape, token bucket) on the GPU, outside any graph capture, and
keeps the faster where their outputs agree; bf16 experts without biases only (fp8, MXFP4 and gpt-oss's biased experts stay on Triton).
"""
# pyright: reportArgumentType=false
# (triton.testing's stubs type do_bench_cudagraph's result as a float, a list or None; it is a float here.)

from __future__ import annotations

import logging
from typing import ClassVar

import torch

log = logging.getLogger(__name__)

MIN_TOKENS = 64  # below, the Triton path's small tiles and the one-token GEMVs serve


def serves(x: torch.Tensor, gate_up: torch.Tensor, gate_up_scale, gate_up_bias, down_bias) -> bool:
    """Whether the grouped GEMM serves these experts: bf16 weights (no fp8 / MXFP4 scales), no biases."""
    plain = gate_up_scale is None and gate_up_bias is None and down_bias is None
    return plain and x.dtype == gate_up.dtype == torch.bfloat16 and hasattr(torch, "_grouped_mm")


def grouped_mm_experts(x, gate_up, down, weights, ids, gating) -> torch.Tensor:
    """sum over each token's k experts of weight * down(gating(gate_up(x))): x [tokens, hidden], gate_up
    [experts, 2 * inner, hidden], down [experts, hidden, inner], weights and ids [tokens, k]."""
    tokens, top_k = ids.shape
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.zeros(gate_up.shape[0], dtype=torch.int64, device=x.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    ends = counts.cumsum(0).to(torch.int32)
    rows = x.index_select(0, order // top_k)
    h = torch._grouped_mm(rows, gate_up.transpose(1, 2), offs=ends)  # pyright: ignore[reportPrivateImportUsage]
    products = torch._grouped_mm(gating(h), down.transpose(1, 2), offs=ends)  # pyright: ignore[reportPrivateImportUsage]
    products = products * weights.flatten().index_select(0, order)[:, None]
    by_assignment = torch.empty_like(products).index_copy_(0, order, products)
    return by_assignment.view(tokens, top_k, -1).sum(dim=1)


def _bucket(tokens: int) -> int:
    return 1 << (tokens - 1).bit_length()


class GroupedMmChooser:
    """Which path runs a mixture's experts for a token count, timed once per (shape, bucket) in CUDA graphs on
    routing drawn at random (even, as served); until timed (or while a graph is captured) the Triton path runs."""

    faster: ClassVar[dict[tuple, bool]] = {}  # shared by every layer of every model

    @classmethod
    def wins(cls, x, gate_up, down, top_k: int, gating, triton_path) -> bool:
        tokens = x.shape[0]
        if tokens < MIN_TOKENS or not x.is_cuda:
            return False
        bucket = _bucket(tokens)
        key = (*gate_up.shape, down.shape[1], top_k, bucket)
        if key in cls.faster:
            return cls.faster[key]
        if torch.cuda.is_current_stream_capturing():
            return False
        from triton.testing import do_bench_cudagraph  # pyright: ignore[reportMissingImports]

        sample = torch.randn(bucket, x.shape[1], device=x.device, dtype=x.dtype)
        ids = torch.rand(bucket, gate_up.shape[0], device=x.device).topk(top_k, dim=1).indices
        weights = torch.full((bucket, top_k), 1.0 / top_k, device=x.device, dtype=x.dtype)
        try:
            agree = torch.allclose(
                grouped_mm_experts(sample, gate_up, down, weights, ids, gating),
                triton_path(sample, weights, ids),
                atol=5e-2,
                rtol=5e-2,
            )
            grouped = float(do_bench_cudagraph(lambda: grouped_mm_experts(sample, gate_up, down, weights, ids, gating)))
        except RuntimeError as error:  # a build without the CUDA kernel, or a layout it refuses
            log.info("torch grouped GEMM unavailable for %s: %s", key, error)
            cls.faster[key] = False
            return False
        if not agree:  # never a faster wrong answer
            log.warning("torch grouped GEMM disagrees with the Triton path for %s: not used", key)
            cls.faster[key] = False
            return False
        tiled = float(do_bench_cudagraph(lambda: triton_path(sample, weights, ids)))
        cls.faster[key] = grouped < 0.97 * tiled
        log.info("experts %s, %d tokens: torch grouped GEMM %.1f us, Triton %.1f us", key[:-1], bucket,
                 grouped * 1e3, tiled * 1e3)  # fmt: skip
        return cls.faster[key]
