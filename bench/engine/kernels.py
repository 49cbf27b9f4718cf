"""The engine's CUDA kernels against the torch / cuBLAS calls they replace, one kernel at a time (CUDA graph
replay timing): skinny matmuls (plain, and with the norm and SwiGLU fused in), split-context attention,
prefill attention (the per-row decode kernel, the prefill kernel and its configurations, SDPA), rope + K/V
store, the row argmax.

    python -m bench.engine.kernels --shape llama-1b
    python -m bench.engine.kernels --shape llama-8b --parts prefill
"""

from __future__ import annotations

import argparse
import contextlib
import itertools

import torch
import triton
from triton.testing import do_bench_cudagraph

from bench.engine.shapes import FAMILY_SHAPES, SHAPES, projection_sizes
from engine_svc.model.decoder import NormedProjection, RMSNorm
from engine_svc.model.fused_ops import FusedOps, rope_split
from engine_svc.model.triton_argmax import argmax_rows
from engine_svc.model.triton_attention import paged_attention, pick_splits, rope_store
from engine_svc.model.triton_linear import _gemv, _skinny_matmul, normed_gemv, skinny_matmul
from engine_svc.model.triton_prefill import prefill_attention


def timed(fn) -> float:
    """Microseconds per call."""
    fn()
    torch.cuda.synchronize()
    return do_bench_cudagraph(fn, rep=50) * 1e3


def matmuls(shape: dict, rows_list) -> None:
    weights = {**projection_sizes(shape), "lm_head": (128256, shape["hidden_size"])}
    print(
        f"{'matmul':<9}{'rows':>5}{'cuBLAS us':>11}{'TB/s':>7}{'skinny us':>11}{'TB/s':>7}{'mv us':>8}  skinny config"
    )
    for name, (n, k) in weights.items():
        weight = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5
        for rows in rows_list:
            x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
            tb = n * k * 2 / 1e6
            blas = timed(lambda: torch.nn.functional.linear(x, weight))
            skinny = timed(lambda: skinny_matmul(x, weight))
            mv = timed(lambda: torch.mv(weight, x[0])) if rows == 1 else float("nan")
            error = (skinny_matmul(x, weight).float() - torch.nn.functional.linear(x, weight).float()).abs().max()
            config = (_gemv if rows == 1 else _skinny_matmul).best_config
            print(
                f"{name:<9}{rows:>5}{blas:>11.2f}{tb / blas:>7.2f}{skinny:>11.2f}{tb / skinny:>7.2f}{mv:>8.2f}  "
                f"{config} (max diff {error:.3f})",
                flush=True,
            )


def normed(shape: dict) -> None:
    """One row's residual add + norm + projection (+ SwiGLU) as one kernel against compiled norm, cuBLAS,
    compiled SwiGLU."""
    hidden, inter = shape["hidden_size"], shape["intermediate_size"]
    heads, kv_heads, dim = shape["num_attention_heads"], shape["num_key_value_heads"], shape["head_dim"]
    ops = FusedOps(True)
    print(f"{'normed':<9}{'unfused us':>12}{'fused us':>10}{'TB/s':>7}  fused config")
    for name, n, gated in [
        ("qkv", (heads + 2 * kv_heads) * dim, False),
        ("gate_up", 2 * inter, True),
        ("lm_head", 128256, False),
    ]:
        linear = torch.nn.Linear(hidden, n, bias=False, device="cuda", dtype=torch.bfloat16)
        norm = RMSNorm(torch.rand(hidden, device="cuda", dtype=torch.bfloat16) + 0.5, 1e-5)
        unfused = NormedProjection(norm, linear, gated)
        fused = lambda: normed_gemv(x, res, norm.weight, norm.eps, linear.weight, gated)  # noqa: E731
        x, res = torch.randn(2, 1, hidden, device="cuda", dtype=torch.bfloat16).unbind()
        plain, one = timed(lambda: unfused(x, res, ops)), timed(fused)
        error = (unfused(x, res, ops)[0].float() - fused()[0].float()).abs().max()
        print(
            f"{name:<9}{plain:>12.2f}{one:>10.2f}{n * hidden * 2 / 1e6 / one:>7.2f}  {_gemv.best_config} "
            f"(max diff {error:.3f})",
            flush=True,
        )


def argmax(rows_list, vocab: int = 128256) -> None:
    print(f"{'argmax':<9}{'rows':>5}{'torch us':>10}{'chunked us':>12}")
    for rows in rows_list:
        logits = torch.randn(rows, vocab, device="cuda", dtype=torch.bfloat16)
        assert torch.equal(argmax_rows(logits), logits.argmax(-1))
        print(
            f"{'':<9}{rows:>5}{timed(lambda: logits.argmax(-1)):>10.2f}{timed(lambda: argmax_rows(logits)):>12.2f}",
            flush=True,
        )


def random_cache(slots: int, kv_heads: int, dim: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(slots, 2, kv_heads, dim, device="cuda", dtype=torch.bfloat16).to(dtype)


def attention(shape: dict, batches, contexts, kv_dtype: torch.dtype, sweep: bool, block_size: int = 16) -> None:
    """The decode kernel at one split and at pick_splits' count, the cache's read rate at the chosen count, and
    the best of a sweep of launches (tile, warps, stages, KV heads as the grid's first axis, splits) with its rate,
    and the next three (with `sweep`; each launch compiles: a minute a row); over a cache of `kv_dtype`."""
    heads, kv_heads, dim = shape["num_attention_heads"], shape["num_key_value_heads"], shape["head_dim"]
    print(
        f"{'attention ' + str(kv_dtype).removeprefix('torch.'):<10}{'rows':>5}{'context':>8}{'1 split us':>12}{'splits':>7}{'split us':>10}{'TB/s':>6}"
        f"{'max diff':>10}{'best us':>9}{'TB/s':>6}  best (tile, warps, stages, heads first, splits)"
    )
    for context in contexts:
        width = -(-context // block_size)
        for rows in batches:
            cache = random_cache(rows * width * block_size + block_size, kv_heads, dim, kv_dtype)
            tables = (torch.randperm(rows * width, device="cuda") + 1).view(rows, width)
            lengths = torch.full((rows,), context, device="cuda")
            q = torch.randn(rows, heads, dim, device="cuda", dtype=torch.bfloat16)
            splits = pick_splits(rows, kv_heads, width * block_size)
            run = lambda s, **kw: paged_attention(q, cache, tables, lengths, block_size, dim**-0.5, splits=s, **kw)  # noqa: E731
            one, many = timed(lambda: run(1)), timed(lambda: run(splits))
            error = (run(1).float() - run(splits).float()).abs().max()
            times = {("defaults", splits): many}
            launches = [(32, 2), (32, 4), (64, 2), (64, 4), (64, 8), (128, 4), (128, 8)] if sweep else []
            for (tile, warps), stages, first, count in itertools.product(
                launches, (1, 2, 3), (False, True), (splits, 2 * splits)
            ):
                with contextlib.suppress(Exception):  # out of shared memory or registers: not a candidate
                    times[(tile, warps, stages, first, count)] = timed(
                        lambda: run(count, tile=tile, num_warps=warps, num_stages=stages, heads_first=first)
                    )
            ranked = sorted(times, key=times.__getitem__)
            best = ranked[0]
            gb = rows * context * kv_heads * dim * 2 * cache.element_size() / 1e9
            print(
                f"{'':<10}{rows:>5}{context:>8}{one:>12.2f}{splits:>7}{many:>10.2f}{gb / many * 1e3:>6.2f}"
                f"{error:>10.4f}{times[best]:>9.2f}{gb / times[best] * 1e3:>6.2f}  {best}; next "
                + ", ".join(f"{launch} {times[launch]:.2f}" for launch in ranked[1:4]),
                flush=True,
            )


def prefill(shape: dict, cases, kv_dtype: torch.dtype, sweep: bool, block_size: int = 16) -> None:
    """A step of `chunks` prefill chunks of `tokens` each after `context` cached tokens: the decode kernel row by
    row (what prefill rows took before), the prefill kernel (default and best of a small sweep of
    configurations), and SDPA over dense, already-gathered K/V (no paging: a bound, not a contender); over a
    cache of `kv_dtype`."""
    heads, kv_heads, dim = shape["num_attention_heads"], shape["num_key_value_heads"], shape["head_dim"]
    scale = dim**-0.5
    print(
        f"{'prefill ' + str(kv_dtype).removeprefix('torch.'):<8}{'chunks':>7}{'tokens':>7}{'context':>8}{'per-row us':>12}{'prefill us':>12}"
        f"{'TFLOP/s':>9}{'best us':>9}{'SDPA us':>9}{'max diff':>10}  best (block_n, warps, stages)"
    )
    for chunks, tokens, context in cases:
        total = context + tokens
        width = -(-total // block_size)
        cache = random_cache(chunks * width * block_size + block_size, kv_heads, dim, kv_dtype)
        tables = (torch.randperm(chunks * width, device="cuda") + 1).view(chunks, width)
        q = torch.randn(chunks * tokens, heads, dim, device="cuda", dtype=torch.bfloat16)
        table = torch.tensor(
            [[i * tokens, tokens, context, i * width] for i in range(chunks)], device="cuda", dtype=torch.int64
        )
        blocks = tables.flatten()
        rows_index = torch.arange(chunks, device="cuda").repeat_interleave(tokens)
        lengths = torch.arange(context + 1, total + 1, device="cuda").repeat(chunks)
        per_row = lambda: paged_attention(q, cache, tables, lengths, block_size, scale, rows_index)  # noqa: E731
        new = lambda **kw: prefill_attention(q, cache, blocks, table, tokens, block_size, scale, **kw)  # noqa: E731
        slots = (tables[:, :, None] * block_size + torch.arange(block_size, device="cuda")).flatten(1)[:, :total]
        gathered = cache.view(torch.uint8)[slots].view(cache.dtype).to(torch.bfloat16)
        k, v = (x.repeat_interleave(heads // kv_heads, 2).transpose(1, 2).contiguous() for x in gathered.unbind(2))
        dense_q = q.view(chunks, tokens, heads, dim).transpose(1, 2)
        causal = torch.arange(total, device="cuda")[None, :] <= torch.arange(context, total, device="cuda")[:, None]
        sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
            dense_q, k, v, attn_mask=None if context == 0 else causal, is_causal=context == 0, scale=scale
        )
        error = (new().float() - per_row().float()).abs().max()
        flops = 4 * heads * dim * chunks * sum(range(context + 1, total + 1))
        row, default, dense = timed(per_row), timed(new), timed(sdpa)
        configs = [(n, w, s) for n in (32, 64, 128) for w in (4, 8) for s in (2, 3)] if sweep else []
        times = {("defaults",): default}
        for n, w, s in configs:
            with contextlib.suppress(Exception):  # out of shared memory or registers: not a candidate
                times[(n, w, s)] = timed(lambda: new(block_n=n, num_warps=w, num_stages=s))
        best = min(times, key=times.__getitem__)
        print(
            f"{'':<8}{chunks:>7}{tokens:>7}{context:>8}{row:>12.1f}{default:>12.1f}{flops / default / 1e6:>9.0f}"
            f"{times[best]:>9.1f}{dense:>9.1f}{error:>10.4f}  {best}",
            flush=True,
        )


def rope(shape: dict, token_counts) -> None:
    heads, kv_heads, dim = shape["num_attention_heads"], shape["num_key_value_heads"], shape["head_dim"]
    compiled = torch.compile(rope_split, dynamic=True)
    print(f"{'rope+store':<11}{'tokens':>7}{'compiled split + index_copy us':>32}{'rope_store us':>15}")
    for tokens in token_counts:
        qkv = torch.randn(tokens, (heads + 2 * kv_heads) * dim, device="cuda", dtype=torch.bfloat16)
        cos = torch.randn(tokens, 1, dim, device="cuda", dtype=torch.bfloat16)
        sin = torch.randn(tokens, 1, dim, device="cuda", dtype=torch.bfloat16)
        cache = torch.zeros(tokens + 16, 2, kv_heads, dim, device="cuda", dtype=torch.bfloat16)
        slots = torch.randperm(tokens, device="cuda")

        def before():
            q, kv = compiled(qkv, cos, sin, heads, kv_heads)
            cache.index_copy_(0, slots, kv)
            return q

        print(
            f"{'':<11}{tokens:>7}{timed(before):>32.2f}{timed(lambda: rope_store(qkv, cos, sin, slots, cache, heads)):>15.2f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="llama-1b")
    parser.add_argument("--rows", default="1,4,8,16")
    parser.add_argument("--parts", default="rope,attention,prefill,matmuls,normed,argmax")
    parser.add_argument("--attention-rows", default="1,8,64,256")
    parser.add_argument("--attention-contexts", default="192,1024")
    parser.add_argument("--sweep", action=argparse.BooleanOptionalAction, default=True, help="attention launches")
    parser.add_argument("--kv-cache-dtypes", default="bf16", help="caches the attention parts run over: bf16, fp8")
    args = parser.parse_args()
    kv_dtypes = [{"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[d] for d in args.kv_cache_dtypes.split(",")]
    shape, parts = SHAPES.get(args.shape) or FAMILY_SHAPES[args.shape], args.parts.split(",")
    print(f"{torch.cuda.get_device_name()}, triton {triton.__version__}, torch {torch.__version__}")
    if "rope" in parts:
        rope(shape, [1, 8, 256, 2048])
    for kv_dtype in kv_dtypes:
        if "attention" in parts:
            attention(
                shape,
                [int(r) for r in args.attention_rows.split(",")],
                [int(c) for c in args.attention_contexts.split(",")],
                kv_dtype,
                args.sweep,
            )
        if "prefill" in parts:  # (chunks, tokens, context): fresh prompts, prefix-cache hits, short continuations
            prefill(
                shape, [(8, 1024, 0), (1, 1024, 0), (8, 256, 768), (32, 64, 1000), (1, 2048, 0)], kv_dtype, args.sweep
            )
    if "matmuls" in parts:
        matmuls(shape, [int(r) for r in args.rows.split(",")])
    if "normed" in parts:
        normed(shape)
    if "argmax" in parts:
        argmax([1, 8, 64, 256])


if __name__ == "__main__":
    main()
