"""Where the step thread's time goes with many in-process streams (CUDA): cProfile of the step thread and of
its steps, after a warm-up round (Python 3.12's cProfile allows one active profile per process). Every round's
prompts are new (no prefix-cache hits).

    python -m bench.engine.profile_steps --shape llama-1b --streams 256
    python -m bench.engine.profile_steps --shape llama-8b --streams 64 --prompt-len 1024 --new-tokens 128
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import itertools
import pstats
import time

import torch

from bench.engine.gpu_check import greedy
from bench.engine.shapes import build_model
from engine_svc.__main__ import make_parser
from engine_svc.serving import engine as engine_module
from engine_svc.serving.loader import build_engine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="llama-1b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--engine-flags", default="--max-model-len 2048")
    args = parser.parse_args()
    model = build_model(args.shape, args.device, torch.bfloat16 if args.device == "cuda" else torch.float32)
    loaded = build_engine(model, make_parser().parse_args(args.engine_flags.split()), model_name=args.shape)
    g = torch.Generator().manual_seed(2)
    prompts = [
        torch.randint(10, model.config.vocab_size - 10, (args.prompt_len,), generator=g).tolist()
        for _ in range(args.streams)
    ]
    rounds = itertools.count()

    def fresh() -> list[list[int]]:  # this round's prompts: a first token of their own, so no prefix-cache hits
        first = next(rounds)
        return [[first] + p[1:] for p in prompts]

    for _ in range(2):
        asyncio.run(greedy(loaded, fresh(), 8))

    step_profile, steps = cProfile.Profile(), []
    original = engine_module.Engine._step

    def profiled(self, outputs):
        start = time.perf_counter()
        step_profile.enable()
        try:
            return original(self, outputs)
        finally:
            step_profile.disable()
            steps.append(time.perf_counter() - start)

    ahead_original, ahead = engine_module.Engine._decode_ahead, []

    def timed_ahead(self, chunks, count, outputs):
        start = time.perf_counter()
        try:
            return ahead_original(self, chunks, count, outputs)
        finally:
            ahead.append(time.perf_counter() - start)

    engine_module.Engine._step, engine_module.Engine._decode_ahead = profiled, timed_ahead
    start = time.perf_counter()
    asyncio.run(greedy(loaded, fresh(), args.new_tokens))
    wall = time.perf_counter() - start
    engine_module.Engine._step, engine_module.Engine._decode_ahead = original, ahead_original
    steps_sorted = sorted(steps)
    print(
        f"{args.streams} streams x {args.new_tokens}: {args.streams * args.new_tokens / wall:.0f} tok/s, "
        f"{len(steps)} steps, wall/step {wall / len(steps) * 1e3:.2f} ms, step median "
        f"{steps_sorted[len(steps) // 2] * 1e3:.2f} ms, max {steps_sorted[-1] * 1e3:.2f} ms, "
        f"sum {sum(steps):.2f} s of {wall:.2f} s; {len(ahead)} of them decode-ahead runs taking {sum(ahead):.2f} s, "
        f"the other {len(steps) - len(ahead)} (prefill/mixed/single) {sum(steps) - sum(ahead):.2f} s"
    )
    text = io.StringIO()
    pstats.Stats(step_profile, stream=text).sort_stats("tottime").print_stats(25)
    print("--- step thread (by own time)\n" + "\n".join(text.getvalue().splitlines()[6:36]))
    if torch.cuda.is_available():  # cudaMalloc/cudaFree under the steps: the caching allocator ran short
        stats = torch.cuda.memory_stats()
        keys = ("num_alloc_retries", "num_device_alloc", "num_device_free", "num_sync_all_streams")
        print("--- CUDA allocator: " + ", ".join(f"{k} {stats.get(k, 0)}" for k in keys))


if __name__ == "__main__":
    main()
