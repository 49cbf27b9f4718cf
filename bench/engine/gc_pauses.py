"""The garbage collector's full passes under load, with and without freezing what was loaded at start (the engine
freezes it in `Engine.start`): in-process closed loop, output tok/s and the pauses of generation-2 collections.

    python -m bench.engine.gc_pauses                     # CPU, llama-host shape (next to no compute), 256 streams
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from unittest import mock

import torch

from bench.engine.isolate import in_child
from bench.engine.run import closed_loop, in_process_request, make_requests, release
from bench.engine.shapes import build_model, shape_vocab
from engine_svc.__main__ import make_parser
from engine_svc.serving.loader import build_engine


async def measure(model, args, freeze: bool) -> str:
    pauses: list[float] = []
    started = [0.0]

    def watch(phase, info):
        if info["generation"] == 2:
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                pauses.append(time.perf_counter() - started[0])

    gc.unfreeze()
    loaded = build_engine(model, make_parser().parse_args(args.engine_flags.split()), model_name=args.shape)
    with mock.patch.object(gc, "freeze", gc.freeze if freeze else lambda: None):
        loaded.engine.start(asyncio.get_running_loop())
    one = in_process_request(loaded, make_requests(args, args.streams * args.rounds, shape_vocab(args.shape)))
    gc.callbacks.append(watch)
    try:
        rate = await closed_loop(args.streams, args.rounds, lambda w, r: one(w, r, args.streams))
    finally:
        gc.callbacks.remove(watch)
        release(loaded)
    return (
        f"{'frozen' if freeze else 'not frozen':>10}: {rate:8.0f} tok/s, {len(pauses)} full collections, "
        f"{sum(pauses) * 1e3:.0f} ms in all, longest {max(pauses, default=0) * 1e3:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shape", default="llama-host")
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--engine-flags", default="--decode-steps 8")
    args = parser.parse_args()
    for freeze in (False, True):  # each in a process of its own: the second finds the GPU empty
        print(in_child(one_config, args, freeze), flush=True)


def one_config(args, freeze: bool) -> str:
    model = build_model(args.shape, args.device, torch.bfloat16 if args.device == "cuda" else torch.float32)
    return asyncio.run(measure(model, args, freeze))


if __name__ == "__main__":
    main()
