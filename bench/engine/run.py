"""Engine throughput, side by side in one run: output tok/s through gRPC (server in a subprocess, measured at the
client) vs the same engine in process, vs transformers continuous batching (`generate_batch`) and `generate`.

    python -m bench.engine                                   # CPU, default model
    python -m bench.engine --device cuda --shape llama-1b --concurrency 1,8,64,256 --prompt-len 128 --new-tokens 128

Every run: random prompt ids of --prompt-len, --new-tokens greedy tokens each (EOS ignored), c streams in a
closed loop (each stream sends --rounds requests one after another).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import signal
import subprocess
import sys
import time

import grpc
import torch
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.engine.isolate import in_child
from bench.engine.shapes import build_model, shape_vocab
from engine_svc.__main__ import make_parser
from engine_svc.scheduling.admission import admit
from engine_svc.serving.loader import build_engine, pick_dtype
from engine_svc.serving.streaming import stream_responses
from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shape", default="default", help="default | llama-1b | llama-8b")
    parser.add_argument("--concurrency", default="1,8,64")
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2, help="requests per stream, back to back")
    parser.add_argument("--baselines", default="cb,generate", help="comma list of: cb, generate (or none)")
    parser.add_argument("--baseline-concurrency", default="", help="concurrencies for the baselines (default: all)")
    parser.add_argument("--engine-flags", default="", help="extra engine flags, e.g. '--max-num-seqs 256'")
    parser.add_argument(
        "--coarse-interval",
        type=int,
        default=0,
        help="also measure gRPC with this stream_interval (tokens per message) at each concurrency",
    )
    parser.add_argument("--threads", type=int, default=0, help="CPU: torch threads (0: torch's default)")
    parser.add_argument("--json", default="", help="write the results here")
    return parser.parse_args()


def make_requests(args, count: int, vocab: int) -> list[engine_pb2.GenerateRequest]:
    rng = random.Random(0)
    return [
        engine_pb2.GenerateRequest(
            token_ids=[rng.randrange(10, vocab - 10) for _ in range(args.prompt_len)],
            sampling_params=common_pb2.SamplingParams(temperature=0.0, max_tokens=args.new_tokens, ignore_eos=True),
        )
        for _ in range(count)
    ]


def pick(prompts, worker: int, round_: int, concurrency: int, new_tokens: int | None, salt: str):
    """The request worker `worker` sends in round `round_` (a copy, with fewer new tokens for warm-ups). Every
    pass over the prompts (a warm-up, a measured run, per stream count) has its own `salt`: the engine's prefix
    cache never serves one pass's prompts from another's (the transformers baselines have no such cache)."""
    message = engine_pb2.GenerateRequest()
    message.CopyFrom(prompts[(round_ * concurrency + worker) % len(prompts)])
    message.cache_salt = salt
    if new_tokens:
        message.sampling_params.max_tokens = new_tokens
    return message


async def closed_loop(concurrency: int, rounds: int, one) -> float:
    """Output tok/s of `concurrency` workers each awaiting `one(worker, round)` (returns tokens) `rounds` times."""

    async def worker(w):
        return sum([await one(w, r) for r in range(rounds)])

    start = time.perf_counter()
    tokens = sum(await asyncio.gather(*[worker(w) for w in range(concurrency)]))
    return tokens / (time.perf_counter() - start)


async def bench_in_process(args, model, levels, vocab) -> dict[int, float]:
    engine_args = make_parser().parse_args(args.engine_flags.split())
    loaded = build_engine(model, engine_args, model_name=args.shape)
    loaded.engine.start(asyncio.get_running_loop())
    one = in_process_request(loaded, make_requests(args, max(levels) * args.rounds, vocab))
    results = {}
    try:
        for c in levels:
            await closed_loop(c, 1, lambda w, r: one(w, r, c, 8, f"warm-up {c}"))  # graph capture
            results[c] = await closed_loop(c, args.rounds, lambda w, r: one(w, r, c, salt=f"run {c}"))
            print(f"  in-process  c={c:<4d} {results[c]:10.1f} tok/s", flush=True)
    finally:
        release(loaded)
    return results


def in_process_child(args, levels, vocab) -> dict[int, float]:
    model = build_model(args.shape, args.device, pick_dtype("auto", torch.device(args.device)))
    return asyncio.run(bench_in_process(args, model, levels, vocab))


def in_process_request(loaded, prompts):
    """`one(worker, round, concurrency, new_tokens=None, salt="")`: that request through the in-process engine,
    streamed; returns its token count."""

    async def one(w, r, c, new_tokens=None, salt=""):
        rid, seqs, interval = admit(pick(prompts, w, r, c, new_tokens, salt), loaded.limits)
        count = 0
        async for m in stream_responses(loaded.engine, loaded.engine.submit(rid, seqs), interval, rid):
            count += sum(len(ch.token_ids) for ch in m.choices)
        return count

    return one


def release(loaded) -> None:
    """Stop an in-process engine and give its GPU memory back."""
    loaded.engine.stop()
    loaded.engine = None  # the caller still holds `loaded`: drop the engine (its KV cache, graphs) here
    gc.collect()  # its cycles, unfrozen by stop()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


async def bench_grpc(args, levels, vocab, coarse: dict[int, float], decode: dict[int, float]) -> dict[int, float]:
    """Output tok/s through gRPC per stream count; fills `coarse` (stream_interval runs) and `decode` (each
    stream's tokens after its first message over the time since it, averaged: the decode speed a client sees)."""
    command = [
        sys.executable,
        "-m",
        "bench.engine.server",
        "--shape",
        args.shape,
        "--device",
        args.device,
        "--port",
        "0",
        "--metrics-port",
        "-1",
        "--log-level",
        "WARNING",
        *args.engine_flags.split(),
    ]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = ""
        while not line.startswith("LISTENING"):
            line = server.stdout.readline()
            if not line and server.poll() is not None:
                raise RuntimeError("engine server exited before listening")
        target = line.split()[-1]
        results = {}
        options = [("grpc.max_receive_message_length", 64 << 20)]
        async with grpc.aio.insecure_channel(target, options=options) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while (
                await health.Check(health_pb2.HealthCheckRequest())
            ).status != health_pb2.HealthCheckResponse.SERVING:
                await asyncio.sleep(0.2)
            stub = engine_pb2_grpc.EngineServiceStub(channel)
            prompts = make_requests(args, max(levels) * args.rounds, vocab)

            rates: list[float] = []

            async def one(w, r, c, new_tokens=None, salt=""):
                count, first = 0, None
                async for m in stub.Generate(pick(prompts, w, r, c, new_tokens, salt)):
                    count += sum(len(ch.token_ids) for ch in m.choices)
                    if first is None:
                        first, first_count = time.perf_counter(), count
                if count > first_count:
                    rates.append((count - first_count) / (time.perf_counter() - first))
                return count

            for c in levels:
                await closed_loop(c, 1, lambda w, r: one(w, r, c, 8, f"warm-up {c}"))
                rates.clear()
                results[c] = await closed_loop(c, args.rounds, lambda w, r: one(w, r, c, salt=f"run {c}"))
                decode[c] = sum(rates) / len(rates)
                print(
                    f"  gRPC        c={c:<4d} {results[c]:10.1f} tok/s  (decode after the first token: "
                    f"{decode[c]:.1f} tok/s per stream)",
                    flush=True,
                )
            if args.coarse_interval:
                for message in prompts:
                    message.stream_interval = args.coarse_interval
                for c in levels:
                    coarse[c] = await closed_loop(c, args.rounds, lambda w, r: one(w, r, c, salt=f"coarse {c}"))
                    print(
                        f"  gRPC stream_interval={args.coarse_interval} c={c:<4d} {coarse[c]:10.1f} tok/s", flush=True
                    )
        return results
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()


def bench_generate(args, model, levels, vocab) -> dict[int, float]:
    results = {}
    for c in levels:
        ids = torch.tensor([list(m.token_ids) for m in make_requests(args, c, vocab)], device=model.device)
        kwargs = dict(do_sample=False, eos_token_id=None, pad_token_id=0)
        model.generate(ids, max_new_tokens=4, min_new_tokens=4, **kwargs)
        sync()
        start = time.perf_counter()
        out = model.generate(ids, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, **kwargs)
        sync()
        results[c] = (out.shape[1] - ids.shape[1]) * c / (time.perf_counter() - start)
        print(f"  generate    c={c:<4d} {results[c]:10.1f} tok/s", flush=True)
    return results


def bench_continuous_batching(args, model, levels, vocab) -> dict[int, float]:
    from transformers import GenerationConfig

    results = {}
    for c in levels:
        inputs = [list(m.token_ids) for m in make_requests(args, c, vocab)]
        config = GenerationConfig(max_new_tokens=args.new_tokens, do_sample=False, eos_token_id=-1, pad_token_id=0)
        model.generate_batch(
            inputs=inputs,
            generation_config=GenerationConfig(max_new_tokens=4, do_sample=False, eos_token_id=-1, pad_token_id=0),
            progress_bar=False,
        )
        sync()
        start = time.perf_counter()
        outputs = model.generate_batch(inputs=inputs, generation_config=config, progress_bar=False)
        sync()
        tokens = sum(len(o.generated_tokens) for o in outputs.values())
        results[c] = tokens / (time.perf_counter() - start)
        print(f"  transformers-cb c={c:<4d} {results[c]:10.1f} tok/s", flush=True)
    return results


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def print_table(args, table: dict[str, dict[int, float]], levels) -> None:
    print(
        f"\nengine bench: shape={args.shape} device={args.device} prompt={args.prompt_len} "
        f"new={args.new_tokens} rounds={args.rounds}  (output tok/s)"
    )
    names = ["in_process", "grpc"] + [n for n in table if n not in ("in_process", "grpc")]
    print(
        f"{'streams':>8} "
        + " ".join(f"{n:>16}" for n in names)
        + f" {'gRPC/in-proc':>13}"
        + "".join(f" {'in-proc/' + b:>18}" for b in names if b.startswith("transformers"))
    )
    for c in levels:
        row = [table[n].get(c) for n in names]
        cells = " ".join(f"{v:16.1f}" if v else f"{'-':>16}" for v in row)
        ratio = table["grpc"].get(c, 0) / table["in_process"][c] if table.get("grpc") else 0
        extra = "".join(
            f" {table['in_process'][c] / table[b][c]:17.2f}x" if table[b].get(c) else f" {'-':>18}"
            for b in names
            if b.startswith("transformers")
        )
        print(f"{c:>8} {cells} {ratio:12.2f}x{extra}")


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    levels = [int(x) for x in args.concurrency.split(",")]
    base_levels = [int(x) for x in args.baseline_concurrency.split(",")] if args.baseline_concurrency else levels
    device = torch.device(args.device)
    table: dict[str, dict[int, float]] = {}
    vocab = shape_vocab(args.shape)
    # gRPC first, while this process holds no model: the server sizes its KV cache from free memory.
    print("gRPC (server subprocess, measured at this client)", flush=True)
    coarse: dict[int, float] = {}
    decode: dict[int, float] = {}
    table["grpc"] = asyncio.run(bench_grpc(args, levels, vocab, coarse, decode))
    if coarse:
        table[f"grpc_interval{args.coarse_interval}"] = coarse
    print("in-process engine (a process of its own: the baselines then find the GPU empty)", flush=True)
    table["in_process"] = in_child(in_process_child, args, levels, vocab)
    baselines = [b for b in args.baselines.split(",") if b and b != "none"]
    model = build_model(args.shape, args.device, pick_dtype("auto", device)) if baselines else None
    if "generate" in baselines:
        print("transformers generate (static batch)", flush=True)
        table["transformers_generate"] = bench_generate(args, model, base_levels, vocab)
    if "cb" in baselines:
        print("transformers continuous batching (generate_batch)", flush=True)
        table["transformers_cb"] = bench_continuous_batching(args, model, base_levels, vocab)
    print_table(args, table, levels)
    print(
        "gRPC decode speed after the first token, per stream: "
        + ", ".join(f"{c} streams {rate:.1f} tok/s" for c, rate in decode.items())
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "args": vars(args),
                    "tok_s": table,
                    "grpc_decode_tok_s_per_stream": decode,
                    "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
