"""Structured outputs' cost, side by side in one run: output tok/s with every stream under a JSON schema against
the same streams unconstrained, and grammar compile times for the schema set with and without the cache.

    python -m bench.structured                                          # CPU, default model, 8 streams
    python -m bench.structured --device cuda --shape llama-1b --streams 64 --prompt-len 128 --new-tokens 128

Throughput: the engine in process (admission, the step loop, streaming: what a request pays but gRPC; the step
loop runs where serving runs it: in an engine core process on CUDA, in a thread on CPU; `--engine-core` in
`--engine-flags` overrides),
`--streams` closed-loop streams of `--rounds` requests each, random prompt ids, greedy, EOS ignored, every
request `--new-tokens` long in both modes (the schema asks for more than that, so a constrained output never
ends early): the two modes differ only in the masks. Modes alternate (`--repeats` times each) and the best of
each is reported. Random-weight shapes pair the default model's tokenizer with their padded vocabulary.

Compile: each schema of tests/clients/structured_schemas.py (55 shapes) compiled cold (`--no-grammar-cache`
path: the backend's compile) and then fetched from a warm GrammarCompiler (the cache the engine keeps).

Masks: the host time of one step's grammar work for `--streams` rows (each matcher accepts a token, then every
row's mask is filled), one row after another and with xgrammar's batch fill on 2, 4 and 8 threads (what
`--grammar-mask-threads` picks between).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import platform
import random
import statistics
import time
from pathlib import Path

import torch

from bench.engine.shapes import shape_vocab
from bench.structured.engine import build
from engine_svc.__main__ import make_parser
from engine_svc.scheduling.admission import admit
from engine_svc.serving.core_process import EngineProcess
from engine_svc.serving.loader import core_in_child_process, make_grammar_backend
from engine_svc.serving.streaming import stream_responses
from engine_svc.structured.compiler import GrammarCompiler
from engine_svc.structured.spec import Constraint
from scaleout.v1 import common_pb2, engine_pb2
from scaleout_common.models import load_tokenizer, resolve_model
from tests.clients.structured_schemas import SCHEMAS

# Asks for far more than --new-tokens: a constrained stream decodes as long as an unconstrained one.
LONG_SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "minItems": 200,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "minimum": 0, "maximum": 999},
                    "name": {"type": "string", "maxLength": 12},
                    "ok": {"type": "boolean"},
                },
                "required": ["id", "name", "ok"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["items"],
    "additionalProperties": False,
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--shape", default="default", help="default | llama-1b | llama-8b (random weights) | host-49k (CPU: host work)"
    )
    parser.add_argument("--tokenizer", default="", help="tokenizer folder (default: the default model's)")
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each mode, alternating; the best counts")
    parser.add_argument("--engine-flags", default="", help="extra engine flags")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--json", default="", help="write the results here")
    return parser.parse_args()


def percentiles(values: list[float]) -> dict:
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {"p50": at(0.5), "p99": at(0.99), "mean": statistics.fmean(ordered), "max": ordered[-1]}


def compile_times(backend) -> dict:
    constraints = [Constraint("json_schema", json.dumps(schema)) for _, schema in SCHEMAS]
    backend.compile(Constraint("json_schema", '{"type": "object"}'))  # first-use set-up out of the numbers
    cold = []
    for constraint in constraints:
        start = time.perf_counter()
        backend.compile(constraint)
        cold.append(time.perf_counter() - start)
    compiler = GrammarCompiler(backend, "bench", threads=1)
    for constraint in constraints:
        compiler.get(constraint).result()
    warm = []
    for constraint in constraints:
        start = time.perf_counter()
        compiler.get(constraint).result()
        warm.append(time.perf_counter() - start)
    compiler.close()
    return {
        "schemas": len(constraints),
        "cold_ms": {k: v * 1e3 for k, v in percentiles(cold).items()},
        "cached_us": {k: v * 1e6 for k, v in percentiles(warm).items()},
    }


def mask_step_times(backend, rows: int, steps: int = 64) -> dict:
    """Host microseconds per step for `rows` matchers under LONG_SCHEMA: accept one token each, fill every mask."""
    import xgrammar as xgr

    grammar = backend.compile(Constraint("json_schema", json.dumps(LONG_SCHEMA)))
    bitmask = backend.allocate_bitmask(rows, pin=False)
    shifts = torch.arange(32, dtype=torch.int32)
    fillers = {"rows": None, **{f"batch{t}": xgr.BatchGrammarMatcher(max_threads=t) for t in (2, 4, 8)}}
    results = {}
    for name, batch in fillers.items():
        matchers = [backend.matcher(grammar, frozenset()).inner for _ in range(rows)]
        rng = random.Random(0)
        accept = fill = 0.0
        for step in range(steps):
            if step:  # every row takes the same token the grammar allows (a random one of row 0's mask)
                allowed = torch.nonzero(((bitmask[0][:, None] >> shifts) & 1).flatten())[:, 0].tolist()
                token = rng.choice(allowed)
                start = time.perf_counter()
                for matcher in matchers:
                    matcher.accept_token(token)
                accept += time.perf_counter() - start
            start = time.perf_counter()
            if batch is None:
                for row, matcher in enumerate(matchers):
                    matcher.fill_next_token_bitmask(bitmask, row)
            else:
                batch.batch_fill_next_token_bitmask(matchers, bitmask, list(range(rows)))
            fill += time.perf_counter() - start
        results[name] = {"accept": accept / (steps - 1) * 1e6, "fill": fill / steps * 1e6}
    return results


def make_requests(args, vocab: int, constrained: bool) -> list[engine_pb2.GenerateRequest]:
    rng = random.Random(0)
    out = []
    for _ in range(args.streams * args.rounds):
        params = common_pb2.SamplingParams(temperature=0.0, max_tokens=args.new_tokens, ignore_eos=True)
        if constrained:
            params.structured_outputs.json_schema = json.dumps(LONG_SCHEMA)
            params.structured_outputs.reasoning_ended = True
        out.append(
            engine_pb2.GenerateRequest(
                token_ids=[rng.randrange(10, min(vocab, 49152) - 10) for _ in range(args.prompt_len)],
                sampling_params=params,
            )
        )
    return out


async def closed_loop(loaded, requests, streams: int, rounds: int, outputs: list | None = None) -> tuple[float, int]:
    """(output tok/s, tokens) of `streams` workers sending `rounds` requests each; `outputs` collects the ids."""
    engine = loaded.engine

    async def worker(index: int) -> int:
        produced = 0
        for r in range(rounds):
            request = requests[r * streams + index]
            request_id, seqs, _ = admit(request, loaded.limits)
            if seqs[0].config.constraint is not None:
                await engine.compile_grammar(seqs[0].config.constraint)
            state = engine.submit(request_id, seqs)
            ids: list[int] = []
            async for message in stream_responses(engine, state, 1, request_id):
                for choice in message.choices:
                    ids += choice.token_ids
            produced += len(ids)
            if outputs is not None:
                outputs.append(ids)
        return produced

    start = time.perf_counter()
    tokens = sum(await asyncio.gather(*[worker(i) for i in range(streams)]))
    return tokens / (time.perf_counter() - start), tokens


def rejected(backend, outputs: list[list[int]]) -> int:
    """Outputs that leave the schema (re-read by a fresh matcher): must be 0."""
    grammar = backend.compile(Constraint("json_schema", json.dumps(LONG_SCHEMA)))
    bad = 0
    for ids in outputs:
        matcher = backend.matcher(grammar, frozenset())
        bad += not all(matcher.accept(token) for token in ids)
    return bad


async def throughput(args, loaded, backend) -> dict:
    loaded.engine.start(asyncio.get_running_loop())
    vocab = loaded.limits.vocab_size
    plain, guided = make_requests(args, vocab, False), make_requests(args, vocab, True)
    warm = argparse.Namespace(**{**vars(args), "new_tokens": 4, "rounds": 1})
    await closed_loop(loaded, make_requests(warm, vocab, True), args.streams, 1)  # compile + warm-up
    await closed_loop(loaded, make_requests(warm, vocab, False), args.streams, 1)
    runs: dict[str, list[float]] = {"unconstrained": [], "json_schema": []}
    outputs: list[list[int]] = []
    for _ in range(args.repeats):
        for mode, requests in (("unconstrained", plain), ("json_schema", guided)):
            collect = outputs if mode == "json_schema" else None
            rate, tokens = await closed_loop(loaded, requests, args.streams, args.rounds, collect)
            assert tokens == args.streams * args.rounds * args.new_tokens, (mode, tokens)
            runs[mode].append(rate)
            print(f"  {mode:>13}: {rate:9.1f} tok/s", flush=True)
    loaded.engine.stop()
    best = {mode: max(rates) for mode, rates in runs.items()}
    bad = rejected(backend, outputs)
    assert bad == 0, f"{bad} constrained outputs left the schema"
    return {
        "runs": runs,
        "best": best,
        "ratio": best["json_schema"] / best["unconstrained"],
        "outputs_checked": len(outputs),
    }


def main() -> None:
    args = parse_args()
    flags = ["--device", args.device, "--port", "0", *args.engine_flags.split()]
    engine_args = make_parser().parse_args(flags)
    device = torch.device(args.device)
    tokenizer = load_tokenizer(Path(args.tokenizer) if args.tokenizer else resolve_model(None))
    vocab = shape_vocab(args.shape)
    backend = make_grammar_backend(tokenizer, vocab, engine_args)  # the compile numbers and the output check
    results: dict = {
        "args": vars(args),
        "machine": {"platform": platform.platform(), "torch": torch.__version__, "threads": torch.get_num_threads()},
    }
    if device.type == "cuda":
        results["machine"]["gpu"] = torch.cuda.get_device_name()
    results["compile"] = compile_times(backend)
    print(json.dumps(results["compile"], indent=1), flush=True)
    results["mask_step_us"] = mask_step_times(backend, args.streams)
    print("one step's grammar work (us):", json.dumps(results["mask_step_us"]), flush=True)
    if not args.skip_throughput:
        builder = functools.partial(build, args, engine_args)
        if core_in_child_process(engine_args):  # as CUDA serving runs: the step loop never waits for our GIL
            loaded, _ = EngineProcess.launch(builder, engine_args.stall_timeout_s)
        else:
            loaded = builder()
        results["throughput"] = asyncio.run(throughput(args, loaded, backend))
        t = results["throughput"]
        print(
            f"{args.streams} streams: unconstrained {t['best']['unconstrained']:.1f} tok/s, "
            f"JSON schema {t['best']['json_schema']:.1f} tok/s, ratio {t['ratio']:.3f}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
