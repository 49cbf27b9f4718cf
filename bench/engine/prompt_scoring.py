"""Prompt scoring through the in-process engine: the wall time of a unary request and the prompt tokens it ran.

    python -m bench.engine.prompt_scoring                  # CPU, default model, 512-token prompts, 1 thread
    python -m bench.engine.prompt_scoring --shape host-49k --prompt-len 256   # next to no model compute

Three requests, each sent --repeats times (medians; one first round warms up):
  both   prompt_logprobs 5 and prompt_logprob_token_ids (4 ids a row) over every row: one log-softmax a row
         serves both answers
  named  prompt_logprob_token_ids alone over every row
  late   prompt_logprob_token_ids over the last 8 rows only, the prompt's blocks cached by a plain request
         before: the blocks before its first scored row come from the prefix cache
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

import torch

from bench.engine.run import release
from bench.engine.shapes import build_model, shape_vocab
from engine_svc.__main__ import make_parser
from engine_svc.scheduling.admission import admit
from engine_svc.serving.loader import build_engine
from engine_svc.serving.streaming import collect
from scaleout.v1 import common_pb2, engine_pb2


def requests(prompt: list[int], vocab: int) -> dict[str, engine_pb2.GenerateRequest]:
    rng = random.Random(1)
    rows = len(prompt) - 1

    def named(count: int) -> list[common_pb2.TokenSequence]:
        return [common_pb2.TokenSequence(token_ids=rng.sample(range(vocab), 4)) for _ in range(count)]

    def one(**params) -> engine_pb2.GenerateRequest:
        sampling = common_pb2.SamplingParams(temperature=0, max_tokens=1, **params)
        return engine_pb2.GenerateRequest(token_ids=prompt, sampling_params=sampling)

    return {
        "both": one(prompt_logprobs=5, prompt_logprob_token_ids=named(rows)),
        "named": one(prompt_logprob_token_ids=named(rows)),
        "late": one(prompt_logprob_token_ids=named(8), prompt_logprob_start=rows - 8),
    }


async def measure(loaded, message: engine_pb2.GenerateRequest, repeats: int) -> tuple[float, int]:
    """Median seconds of the request and the prompt tokens it ran (computed, not cached) the last time."""
    engine, times = loaded.engine, []
    for _ in range(repeats + 1):
        plain = engine_pb2.GenerateRequest(token_ids=message.token_ids)
        plain.sampling_params.max_tokens = 1
        for request in (plain, message):  # the plain one caches the prompt's blocks
            rid, seqs, _ = admit(request, loaded.limits)
            computed, start = engine.prompt_tokens_computed, time.perf_counter()
            answer = await collect(engine, engine.submit(rid, seqs), rid)
            assert answer.finished and not answer.HasField("error"), answer
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:]), engine.prompt_tokens_computed - computed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="default")
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--engine-flags", default="")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    vocab = shape_vocab(args.shape)
    model = build_model(args.shape, "cpu", torch.float32, max_len=4096)
    flags = ["--max-model-len", "4096", *args.engine_flags.split()]
    loaded = build_engine(model, make_parser().parse_args(flags), model_name=args.shape)
    loaded.engine.start(asyncio.get_running_loop())
    prompt = [1, *random.Random(0).choices(range(10, vocab - 10), k=args.prompt_len - 1)]
    try:
        for name, message in requests(prompt, vocab).items():
            seconds, ran = await measure(loaded, message, args.repeats)
            print(f"{name:6s} {seconds * 1000:9.1f} ms  {ran:5d} prompt tokens run", flush=True)
    finally:
        release(loaded)


if __name__ == "__main__":
    asyncio.run(main())
