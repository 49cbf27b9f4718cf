"""The fused experts' tiles (engine_svc/model/triton_moe.py `Tiles`) swept on a GPU: one layer of a mixture's shape,
bf16 and fp8 experts (or the `--formats` named: mxfp4, gpt-oss's 4-bit experts), at several token counts; each
launch's time, the bytes of the experts its tokens reach (the bound of a memory-bound step) as GB/s against the
measured copy bandwidth, and its largest difference from the default tiles' output. For choosing the tiles per shape (issue 39: Qwen3-30B-A3B at 34% of its roofline with the
default ones).

    python -m bench.engine.moe_tiles --shape qwen3-30b-a3b --tokens 1,64,256,2048 --json moe_tiles.json
    python -m bench.engine.moe_tiles --shape gpt-oss-20b --formats bf16,mxfp4 --tokens 1,64 --grid small

Small token counts are bound by the experts' bytes (GB/s against the copy bandwidth), large ones (prefill chunks)
by the tensor cores (TFLOP/s).
"""

from __future__ import annotations

import argparse
import itertools
import json

import torch

from bench.engine.shapes import FAMILY_SHAPES, SHAPES
from bench.serving.roofline import measure
from engine_svc.model import mxfp4
from engine_svc.model.fp8_linear import quantize_rows
from engine_svc.model.moe import Gating
from engine_svc.model.triton_moe import TILES, Tiles, fused_experts, table_path

GRIDS = {  # large: prefill chunks (tensor-core bound); small: decode batches (bound by the experts' bytes)
    "large": [
        Tiles(m, n, k, w, s)
        for m, n, k, w, s in itertools.product((16, 32, 64, 128), (64, 128, 256), (64, 128), (4, 8), (3, 4))
    ],
    "small": [
        Tiles(16, n, k, w, s) for n, k, w, s in itertools.product((32, 64, 128), (64, 128, 256), (4, 8), (3, 4, 5))
    ],
}


def timed(run, repeat: int = 20) -> float:
    """Mean seconds a call replayed from a CUDA graph (as the engine's steps run: no launch cost), by CUDA events,
    after a warm-up call."""
    run()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / repeat


def layer(shape: dict, weights: str):
    """(gate_up, down, their scales or None): one layer's experts, random, in `weights`' format."""
    experts, hidden, inner = _experts(shape), shape["hidden_size"], _inner(shape)
    gate_up = torch.randn(experts, 2 * inner, hidden, device="cuda", dtype=torch.bfloat16) / hidden**0.5
    down = torch.randn(experts, hidden, inner, device="cuda", dtype=torch.bfloat16) / inner**0.5
    if weights == "bf16":
        return gate_up, down, None, None
    if weights == "mxfp4":
        (q1, s1), (q2, s2) = (mxfp4.quantize(w) for w in (gate_up, down))
        return q1, q2, s1, s2
    (q1, s1), (q2, s2) = (quantize_rows(w.reshape(-1, w.shape[-1])) for w in (gate_up, down))
    return q1.view(gate_up.shape), q2.view(down.shape), s1.view(gate_up.shape[:2]), s2.view(down.shape[:2])


def _experts(shape: dict) -> int:
    return next(shape[key] for key in ("num_experts", "n_routed_experts", "num_local_experts") if key in shape)


def _inner(shape: dict) -> int:
    return shape.get("moe_intermediate_size", shape["intermediate_size"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="qwen3-30b-a3b")
    parser.add_argument("--tokens", default="1,64,256")
    parser.add_argument("--grid", choices=sorted(GRIDS), default="large")
    parser.add_argument("--formats", default="bf16,fp8", help="the experts' formats: bf16, fp8, mxfp4")
    parser.add_argument("--json", default="")
    parser.add_argument("--write", action="store_true", help="write the best tiles a token count as the engine's table")
    args = parser.parse_args()
    shape = {**SHAPES, **FAMILY_SHAPES}[args.shape]
    experts, top_k, hidden = _experts(shape), shape["num_experts_per_tok"], shape["hidden_size"]
    bandwidth = measure("cuda", torch.bfloat16).bandwidth
    rows = []
    formats = args.formats.split(",")
    for fmt, tokens in itertools.product(formats, (int(t) for t in args.tokens.split(","))):
        gate_up, down, s1, s2 = layer(shape, fmt)
        x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
        ids = torch.rand(tokens, experts, device="cuda").topk(top_k, dim=1).indices
        weights = torch.full((tokens, top_k), 1 / top_k, device="cuda", dtype=torch.bfloat16)
        scales = 0 if s1 is None or s2 is None else s1[0].nbytes + s2[0].nbytes
        reached = ids.unique().numel() * (gate_up[0].nbytes + down[0].nbytes + scales)
        flops = 6 * tokens * top_k * hidden * _inner(shape)

        def run(tiles: Tiles):
            return fused_experts(x, gate_up, down, weights, ids, Gating(), None, None, s1, s2, tiles=tiles)

        reference = run(TILES)
        for tiles in [TILES, *GRIDS[args.grid]]:
            try:
                seconds = timed(lambda: run(tiles))
                error = (run(tiles) - reference).abs().max().item()
            except Exception as failure:  # a tile too large for shared memory: reported, the sweep goes on
                print(f"{fmt} {tokens:4d} tokens {tiles}: {type(failure).__name__}")
                continue
            rows.append(
                {"format": fmt, "tokens": tokens, "tiles": tiles._asdict(), "us": seconds * 1e6,
                 "bandwidth_share": reached / seconds / bandwidth, "tflops": flops / seconds / 1e12, "max_diff": error, "default": tiles == TILES}
            )  # fmt: skip
        if tokens == 1:  # the engine's one-token call: GEMVs (triton_moe_gemv.py), no tiles
            seconds = timed(lambda: fused_experts(x, gate_up, down, weights, ids, Gating(), None, None, s1, s2))
            print(f"{fmt}    1 token as GEMVs: {seconds * 1e6:.1f} us ({reached / seconds / bandwidth:.0%} of the copy "
                  f"bandwidth)", flush=True)  # fmt: skip
        mine = [r for r in rows if r["format"] == fmt and r["tokens"] == tokens]
        best, default = min(mine, key=lambda r: r["us"]), next(r for r in mine if r["default"])
        print(
            f"{fmt} {tokens:4d} tokens: default {default['us']:.1f} us "
            f"({default['bandwidth_share']:.0%} of the copy bandwidth, {default['tflops']:.0f} TFLOP/s), best "
            f"{best['us']:.1f} us ({best['bandwidth_share']:.0%}, {best['tflops']:.0f} TFLOP/s) with "
            f"{Tiles(**best['tiles'])}, max diff {best['max_diff']:.2e}",
            flush=True,
        )
    if args.write:
        for fmt in formats:
            best = {}
            for row in (r for r in rows if r["format"] == fmt):
                if row["tokens"] not in best or row["us"] < best[row["tokens"]]["us"]:
                    best[row["tokens"]] = row
            path = table_path(_experts(shape), _inner(shape), fmt, torch.cuda.get_device_name())
            table = json.loads(path.read_text()) if path.exists() else {}  # other token counts' entries stay
            table.update({str(t): r["tiles"] for t, r in best.items()})
            path.write_text(json.dumps(dict(sorted(table.items(), key=lambda e: int(e[0]))), indent=1) + "\n")
            print(f"wrote {path}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": args.shape, "bandwidth": bandwidth, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
