"""Batch-1 decode speed with and without speculation (n-gram or a draft model), in process, on workloads where
drafts do and do not pay; acceptance from the engine's own counters.

    python -m bench.engine.spec_decode --device cuda --shape llama-8b \\
        --configs "--max-model-len 4096;--max-model-len 4096 --speculative-config '{\"method\": \"ngram\", ...}'"

Draft models: `--draft-layers N` writes a draft of the shape into `--draft-dir` (the target's random weights cut
to its first N layers, with its embeddings, final norm and head: a layer-skip draft of the same vocabulary), and
`@draft` in a configuration stands for that folder:

    --draft-layers 2 --configs "...;... --speculative-config '{\"method\": \"draft_model\", \"model\": \"@draft\",
        \"num_speculative_tokens\": 4}'"

Random weights make a model's own text meaningless, so the repetitive workload is built from the model's output
(on a shape that copies: a plain random-weight model's next token depends on its whole context, so it does not
write G again; bench/engine/shapes.py's mistral-7b-w8 sees only its last 225 tokens, and does):
`echo` first asks for a greedy continuation G of a random prompt P (not timed, on the first configuration), then
times P + G + P: a model whose next token follows its context writes G again, which the n-gram lookup finds in
the prompt (the shape of code editing or summarising a given text). `random` is a fresh random prompt, greedy
(drafts appear only if the model falls into a loop); `sampled` the same at temperature 1 (drafts, when an n-gram
matches, are mostly rejected: speculation has to switch itself off). Each line: decode tok/s (tokens after the
first over the time since it), the copy share of echo's output, and per configuration with speculation its
acceptance (accepted / draft tokens) and mean tokens per verify step; then each configuration against the first.
Each configuration runs in a process of its own (bench/engine/isolate.py): the next one finds the GPU empty.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shlex
import time

import torch

from bench.engine.isolate import in_child
from bench.engine.shapes import build_model, shape_vocab
from engine_svc.__main__ import make_parser
from engine_svc.scheduling.admission import admit
from engine_svc.serving.loader import build_engine, pick_dtype
from engine_svc.serving.streaming import stream_responses
from scaleout.v1 import common_pb2, engine_pb2

WORKLOADS = ("echo", "random", "sampled")


async def generate(loaded, prompt: list[int], new_tokens: int, temperature: float = 0.0) -> tuple[list[int], float]:
    """One request's tokens and its decode tok/s."""
    params = common_pb2.SamplingParams(temperature=temperature, max_tokens=new_tokens, ignore_eos=True, seed=1)
    message = engine_pb2.GenerateRequest(token_ids=prompt, sampling_params=params)
    rid, seqs, interval = admit(message, loaded.limits)
    tokens: list[int] = []
    first = 0.0
    async for m in stream_responses(loaded.engine, loaded.engine.submit(rid, seqs), interval, rid):
        for choice in m.choices:
            if not tokens:
                first = time.perf_counter()
            tokens += choice.token_ids
    return tokens, (len(tokens) - 1) / max(time.perf_counter() - first, 1e-9)


async def measure(args, flags: str, prompts: list[list[int]], echoes: list[list[int]]) -> dict[str, float]:
    """One configuration's decode tok/s per workload (fills `echoes` when empty: the first configuration)."""
    device, vocab, rng = args.device, shape_vocab(args.shape), random.Random(1)
    model = build_model(args.shape, device, pick_dtype(args.dtype, torch.device(device)), max_len(args))
    loaded = build_engine(model, make_parser().parse_args(shlex.split(flags)), model_name=args.shape, owns_model=True)
    del model
    loaded.engine.start(asyncio.get_running_loop())
    try:
        await generate(loaded, prompts[0][:16], 8)  # warm-up: graph capture
        if not echoes:
            for p in prompts:
                echoes.append(p + (await generate(loaded, p, args.output_len))[0] + p)
        speeds: dict[str, float] = {}
        for workload in WORKLOADS:
            before = loaded.engine.load()
            rates, copied = [], 0
            for i in range(len(prompts)):
                if workload == "echo":
                    out, rate = await generate(loaded, echoes[i], args.output_len)
                    g = echoes[i][args.input_len : -args.input_len]
                    copied += next((j for j, (a, b) in enumerate(zip(out, g)) if a != b), len(out))
                else:
                    fresh = [rng.randrange(10, vocab - 10) for _ in range(args.input_len)]
                    out, rate = await generate(loaded, fresh, args.output_len, 1.0 if workload == "sampled" else 0)
                rates.append(rate)
            speeds[workload] = sum(rates) / len(rates)
            line = f"{workload:8s} {speeds[workload]:9.1f} tok/s"
            if workload == "echo":
                line += f"  copied {copied / (len(prompts) * args.output_len):5.1%}"
            after = loaded.engine.load()
            drafts = after.spec_decode_num_drafts - before.spec_decode_num_drafts
            if after.spec_decode_num_accepted_tokens_per_pos:
                proposed = after.spec_decode_num_draft_tokens - before.spec_decode_num_draft_tokens
                accepted = after.spec_decode_num_accepted_tokens - before.spec_decode_num_accepted_tokens
                line += (
                    f"  verifies {drafts}  acceptance {accepted / max(proposed, 1):5.1%}"
                    f"  tokens/verify {1 + accepted / max(drafts, 1):4.2f}"
                )
            print(f"[{flags}] {line}", flush=True)
        return speeds
    finally:
        loaded.engine.stop()


def one_config(args, flags: str, prompts, echoes) -> tuple[dict[str, float], list[list[int]]]:
    """A child process's work (isolate.py): one configuration, and the echo prompts for the next."""
    speeds = asyncio.run(measure(args, flags, prompts, echoes))
    return speeds, echoes


def max_len(args) -> int:
    """The random-weight model's context: what the workloads need (echo prompts are P + G + P)."""
    return args.input_len * 3 + args.output_len * 3


def write_draft(args) -> str:
    """A child process's work: the shape's model (the target's seeded weights) cut to its first `draft_layers`
    layers, saved as a folder for --speculative-config's "model" (at the shape's full context, so a served bench
    of the shape, bench.serving, may use it too: the context length changes no weight)."""
    model = build_model(args.shape, args.device, pick_dtype(args.dtype, torch.device(args.device)))
    inner = model.model
    inner.layers = inner.layers[: args.draft_layers]
    model.config.num_hidden_layers = args.draft_layers
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = model.config.layer_types[: args.draft_layers]
    model.save_pretrained(args.draft_dir)
    return args.draft_dir


def run(args) -> dict[str, dict[str, float]]:
    """Each configuration in a process of its own (the engine's GPU memory goes with it); tok/s by flags."""
    if args.draft_layers:
        args.configs = args.configs.replace("@draft", in_child(write_draft, args))
    vocab, rng = shape_vocab(args.shape), random.Random(0)
    prompts = [[rng.randrange(10, vocab - 10) for _ in range(args.input_len)] for _ in range(args.prompts)]
    echoes: list[list[int]] = []
    results: dict[str, dict[str, float]] = {}
    for flags in args.configs.split(";"):
        results[flags], echoes = in_child(one_config, args, flags, prompts, echoes)
    base = next(iter(results.values()))
    for flags, speeds in list(results.items())[1:]:
        ratios = "  ".join(f"{w} {speeds[w] / base[w]:4.2f}x" for w in WORKLOADS)
        print(f"vs first: [{flags}] {ratios}", flush=True)
    return results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--shape", default="llama-tiny", help="a random-weight shape of bench/engine/shapes.py")
    parser.add_argument("--configs", required=True, help="';'-separated engine flag strings, the first the baseline")
    parser.add_argument("--input-len", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--prompts", type=int, default=3, help="requests per workload, one at a time")
    parser.add_argument("--draft-layers", type=int, default=0, help="write a draft of the shape's first N layers")
    parser.add_argument("--draft-dir", default="/tmp/spec_draft", help="where --draft-layers writes it (@draft)")
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
