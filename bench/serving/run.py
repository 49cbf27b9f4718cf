"""Serving benchmark in the manner of `vllm bench serve`, with the roofline beside every figure.

    python -m bench.serving                                   # CPU, default model: every dataset, caching on vs off
    python -m bench.serving --dataset multiturn --target engine,gateway --concurrency 4
    python -m bench.serving --device cuda --shape llama-8b --dataset random --input-len 1024 --output-len 128 \\
        --num-prompts 512 --concurrency 64 --caching on

Datasets (bench/serving/datasets.py): `random` (fixed --input-len / --output-len), `sharegpt` (a ShareGPT-like
synthetic length mix), `multiturn` (--conversations conversations of --turns turns behind one shared
--system-len-token system prompt). Load: a closed loop of --concurrency streams, or Poisson arrivals at
--request-rate requests/s (conversations arrive; their turns follow one another). Targets: `engine` (its gRPC
API, server in a subprocess) and `gateway` (the one-hop chat through Envoy with render, engine and derender:
the devstack; needs a model with a tokenizer, i.e. the default model). `--caching on,off` runs each
configuration with prefix caching on and then off, in the same run, and prints the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.engine.shapes import shape_config, shape_vocab
from bench.serving import datasets, engine_view, roofline
from bench.serving.clients import OPTIONS, EngineClient, GatewayChatClient
from bench.serving.gpu_power import PowerSampler
from bench.serving.load import Load, run_load
from bench.serving.metrics import summarize


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="engine", help="comma list of: engine, gateway")
    parser.add_argument(
        "--dataset",
        default="random,sharegpt,multiturn",
        help="comma list of name[:INxOUT][@C]: random, sharegpt or multiturn, random's lengths, the streams",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument(
        "--shape",
        default="default",
        help="default | llama-1b | llama-8b | qwen3-8b | qwen3-30b-a3b | mistral-7b | gemma3-270m (random weights; "
        "bench/engine/shapes.py)",
    )
    parser.add_argument("--model", default=None, help="serve this model folder instead of a --shape")
    parser.add_argument("--num-prompts", type=int, default=32, help="requests of the single-turn datasets")
    parser.add_argument(
        "--prompts-per-stream", type=int, default=0, help="random: this many requests per stream instead"
    )
    parser.add_argument("--input-len", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--max-output-len", type=int, default=1024, help="sharegpt: longest answer drawn")
    parser.add_argument("--conversations", type=int, default=16, help="multiturn: conversations")
    parser.add_argument("--turns", type=int, default=4, help="multiturn: turns per conversation")
    parser.add_argument("--system-len", type=int, default=1000, help="multiturn: shared system prompt tokens")
    parser.add_argument("--user-len", type=int, default=64, help="multiturn: tokens per user turn")
    parser.add_argument("--turn-output-len", type=int, default=32, help="multiturn: tokens per answer")
    parser.add_argument("--concurrency", type=int, default=4, help="closed loop: streams (0: use --request-rate)")
    parser.add_argument("--request-rate", type=float, default=0.0, help="Poisson arrivals per second (inf: all)")
    parser.add_argument(
        "--client-processes", default="1", help="load-generator processes the streams are split over (comma list: each)"
    )
    parser.add_argument(
        "--connections", type=int, default=1, help="connections of each load-generator process (turns take turns)"
    )
    parser.add_argument("--caching", default="on,off", help="prefix caching settings to run: on, off or on,off")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=FLAGS",
        help="a named set of extra engine flags (repeat it): each runs in turn, and each is compared with the first",
    )
    parser.add_argument("--engine-flags", default="", help="extra engine flags, e.g. '--max-num-seqs 256'")
    parser.add_argument("--slo-ttft-ms", type=float, default=2000.0, help="goodput: TTFT at most this")
    parser.add_argument("--slo-tpot-ms", type=float, default=200.0, help="goodput: TPOT at most this")
    parser.add_argument("--warmup", type=int, default=2, help="requests before measuring (not counted)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="", help="write every result here")
    return parser.parse_args(argv)


# ---- servers ------------------------------------------------------------------------------------------------


async def wait_serving(target: str, process: subprocess.Popen | None = None) -> None:
    """Until the server at `target` says SERVING (LISTENING comes before the model has loaded)."""
    import grpc

    async with grpc.aio.insecure_channel(target, options=OPTIONS) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=2)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            if process is not None and process.poll() is not None:
                raise RuntimeError("the server exited while starting")
            await asyncio.sleep(0.2)


class EngineServer:
    """`python -m bench.engine.server` in a subprocess (the real EngineService on the bench model)."""

    def __init__(self, args, flags: list[str]):
        served = ["--model", args.model] if args.model else ["--shape", args.shape]
        command = [sys.executable, "-m", "bench.engine.server", *served, "--device", args.device]
        command += ["--dtype", args.dtype, "--port", "0", "--log-level", "WARNING"]
        self.process = subprocess.Popen(
            command + flags, stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1")
        )
        lines = {}
        while "METRICS" not in lines:  # printed right after LISTENING
            line = self.process.stdout.readline()  # type: ignore[union-attr]
            if not line and self.process.poll() is not None:
                raise RuntimeError("engine server exited before listening")
            lines[line.split(" ", 1)[0]] = line.split()[-1] if line.strip() else ""
        self.target, self.metrics = lines["LISTENING"], lines["METRICS"]

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()


class GatewayStack:
    """The devstack (render, engine, derender, chat, Envoy) on loopback; the client talks to Envoy."""

    def __init__(self, args, flags: list[str]):
        from devstack.stack import Stack, StackConfig

        config = StackConfig(
            port=0,
            service_args={"engine": ["--device", args.device, "--dtype", args.dtype, *flags]},
            log_dir=Path(os.environ.get("TMPDIR", "/tmp")) / "bench-serving-stack",
        )
        self.stack = Stack(config)
        self.stack.start()
        self.target = self.stack.gateway
        self.metrics = next((r.metrics_url for r in self.stack.replicas if r.name.startswith("engine")), "") or ""

    def stop(self) -> None:
        self.stack.stop()


def parse_spec(spec: str, args) -> tuple[str, int, int, int]:
    """`name[:INxOUT][@C]` -> (name, input len, output len, concurrency), the flags giving what is left out:
    `random:1024x128@64` is the random dataset at 1,024 in / 128 out with 64 streams."""
    name, _, concurrency = spec.partition("@")
    name, _, lengths = name.partition(":")
    input_len, _, output_len = lengths.partition("x")
    return (
        name,
        int(input_len or args.input_len),
        int(output_len or args.output_len),
        int(concurrency) if concurrency else args.concurrency,
    )


def build_dataset(
    args, name: str, vocab: int, text: bool, input_len: int, output_len: int, concurrency: int, seed: int
):
    if name == "random":
        count = args.prompts_per_stream * concurrency if args.prompts_per_stream and concurrency else args.num_prompts
        return datasets.random_lengths(count, input_len, output_len, vocab, text, seed)
    if name == "sharegpt":
        return datasets.sharegpt_like(args.num_prompts, vocab, text, seed, max_output_len=args.max_output_len)
    if name == "multiturn":
        return datasets.multi_turn(
            args.conversations,
            args.turns,
            args.system_len,
            args.user_len,
            args.turn_output_len,
            vocab,
            text,
            seed,
        )
    raise SystemExit(f"unknown dataset {name!r}")


# ---- report -------------------------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return f"{value * 1e3:9.1f}"


def report(label: str, summary: dict, bound: dict) -> None:
    def share(measured: float, best: float) -> str:
        return f"roofline {best:10.1f}  ({measured / best:6.1%})" if best else ""

    print(f"\n== {label} ==")
    print(f"requests {summary['requests']} ({summary['failed']} failed) in {summary['duration_s']:.1f} s")
    for error, count in summary.get("errors", []):
        print(f"  {count} x {error}")
    print(
        f"request/s       {summary['request_per_s']:10.2f}   {share(summary['request_per_s'], bound['request_per_s'])}"
    )
    print(
        f"output tok/s    {summary['output_tok_per_s']:10.1f}   "
        f"{share(summary['output_tok_per_s'], bound['output_tok_per_s'])}"
    )
    print(
        f"total tok/s     {summary['total_tok_per_s']:10.1f}   "
        f"{share(summary['total_tok_per_s'], bound['total_tok_per_s'])}"
    )
    for name, key, note in (
        ("TTFT", "ttft_s", "one prefill alone"),
        ("TPOT", "tpot_s", "one decode step of the batch"),
        ("ITL", "itl_s", "one decode step of the batch"),
    ):
        stats = summary[key]
        best = bound["ttft_s"] if key == "ttft_s" else bound["tpot_s"]
        print(
            f"{name:5s} ms  mean {_ms(stats['mean'])}  p50 {_ms(stats['p50'])}  p99 {_ms(stats['p99'])}   "
            f"roofline {_ms(best)} ({note})"
        )
    slo = summary["slo"]
    print(
        f"goodput         {summary['goodput_req_per_s']:10.2f} req/s  (TTFT <= {slo['ttft_s'] * 1e3:.0f} ms, "
        f"TPOT <= {slo['tpot_s'] * 1e3:.0f} ms)"
    )
    prompt = summary["prompt_tokens"]
    print(
        f"prompt tokens   {prompt} ({summary['cached_tokens']} from the prefix cache: "
        f"{summary['cached_tokens'] / max(prompt, 1):.1%}), output tokens {summary['output_tokens']}"
    )
    view = summary["engine_view"]
    if view:
        print(
            f"in the engine   TTFT mean {_ms(view.get('ttft_s', float('nan')))} ms (from its Generate call's start), "
            f"of which {_ms(view.get('queue_s', float('nan'))).strip()} ms waiting to be scheduled; "
            f"{view.get('preemptions', 0):.0f} preemptions"
        )
    if summary.get("gpu"):
        print(PowerSampler.describe(summary["gpu"]))
    busiest = summary["client_busiest"]
    print(
        f"load generator  {summary['client_processes']} process(es), the busiest at {busiest:.0%} of a core"
        + ("  (near 100%: these figures time the client; try --client-processes)" if busiest > 0.85 else "")
    )


def model_shape(args, dtype: torch.dtype) -> roofline.ModelShape:
    from transformers import AutoConfig

    if args.model or args.shape == "default":
        from scaleout_common.models import resolve_model

        config = AutoConfig.from_pretrained(resolve_model(args.model))
    else:
        config = shape_config(args.shape)
    return roofline.ModelShape.from_config(config, torch.empty((), dtype=dtype).element_size())


async def _scrape(server) -> dict:
    """The engine's timing histograms (off the event loop: an HTTP round trip); none without a metrics port."""
    return await asyncio.to_thread(engine_view.scrape, server.metrics) if server.metrics else {}


@dataclass
class Bench:
    shape: roofline.ModelShape
    machine: roofline.Machine
    vocab: int


async def measure(args, bench: Bench, server, client, config: tuple[str, str], spec: str, index: int, processes: int):
    """One dataset through a running server, from `processes` load-generator processes: reported and returned."""
    target = "gateway" if isinstance(server, GatewayStack) else "engine"
    name, input_len, output_len, streams = parse_spec(spec, args)
    seed = args.seed + 1000 * index
    text = target == "gateway"
    conversations = build_dataset(args, name, bench.vocab, text, input_len, output_len, streams, seed)
    if streams:
        streams = min(streams, len(conversations))
    before = await _scrape(server)
    with PowerSampler(args.device) as power:
        driven = await run_load(client, conversations, Load(streams, args.request_rate, args.seed), processes)
    after = await _scrape(server)
    results = driven.results
    summary = summarize(results, driven.duration_s, args.slo_ttft_ms / 1e3, args.slo_tpot_ms / 1e3)
    summary["client_processes"], summary["client_busiest"] = driven.processes, driven.busiest
    summary["engine_view"] = engine_view.difference(before, after)
    summary["gpu"] = power.summary(driven.duration_s, summary["output_tokens"])
    done = max(len(results) - summary["failed"], 1)
    concurrency = streams or max(1, round(args.request_rate * summary["ttft_s"]["mean"]))
    per_request = (summary[key] / done for key in ("prompt_tokens", "cached_tokens", "output_tokens"))
    bound = roofline.bounds(bench.shape, bench.machine, concurrency, *per_request)
    how = f"closed loop c={streams}" if streams else f"{args.request_rate} req/s"
    lengths = f" {input_len}/{output_len}" if name == "random" else ""
    variant, caching = config
    named = f" | {variant}" if variant else ""
    label = f"{target} | {name}{lengths} | caching {caching}{named} | {how} | {served_model(args)} on {args.device}"
    report(label, summary, bound)
    run = {"target": target, "dataset": spec, "caching": caching, "variant": variant, "label": label, **summary}
    return {**run, "roofline": bound}


async def main_async(args, save=lambda runs: None) -> list[dict]:
    from engine_svc.serving.loader import pick_device, pick_dtype

    dtype = pick_dtype(args.dtype, pick_device(args.device))
    machine = roofline.measure(args.device, dtype)
    shape = model_shape(args, dtype)
    print(machine.describe())
    print(
        f"model {served_model(args)}: {shape.matmul_params / 1e6:.0f}M matmul parameters, "
        f"{shape.weight_bytes / 1e9:.2f} GB read per decode step of one token, "
        f"{shape.kv_bytes_per_token / 1024:.1f} KiB KV/token "
        "in the model's dtype"
    )
    vocab = shape.vocab if args.model else shape_vocab(args.shape)
    bench = Bench(shape, machine, vocab)
    runs = []
    for target in args.target.split(","):
        if target == "gateway" and (args.model or args.shape != "default"):
            raise SystemExit("the gateway target renders text: it needs the default model (a tokenizer)")
        for (variant, extra), caching in itertools.product(variants(args), args.caching.split(",")):
            flags = args.engine_flags.split() + extra + (["--no-prefix-caching"] if caching == "off" else [])
            began = time.perf_counter()
            served = replace(bench, shape=bench.shape.for_flags(flags))  # the roofline of the dtypes run
            server = EngineServer(args, flags) if target == "engine" else GatewayStack(args, flags)
            try:
                await wait_serving(server.target, getattr(server, "process", None))
                print(
                    f"\n[{target} {variant} with caching {caching} serving after {time.perf_counter() - began:.0f} s; "
                    f"the roofline reads {served.shape.weight_bytes / 1e9:.2f} GB of weights a decode step of one "
                    f"token ({served.shape.weight_bytes_at(64) / 1e9:.2f} GB at 64) and "
                    f"{served.shape.kv_bytes_per_token / 1024:.1f} KiB of KV a token]",
                    flush=True,
                )
                kind = EngineClient if target == "engine" else GatewayChatClient
                client = kind(server.target, args.connections)
                warm = datasets.random_lengths(args.warmup, 16, 4, vocab, target == "gateway", seed=args.seed + 999)
                await run_load(client, warm, Load(1, 0.0, args.seed, salt="warm-up"))
                sweep = itertools.product(args.dataset.split(","), map(int, args.client_processes.split(",")))
                for index, (spec, processes) in enumerate(sweep):  # each run its own prompts: none cached by another
                    config = (variant, caching)
                    runs.append(await measure(args, served, server, client, config, spec, index, processes))
                    save(runs)
                await client.close()
            finally:
                server.stop()
    compare(runs)
    return runs


def variants(args) -> list[tuple[str, list[str]]]:
    """--variant NAME=FLAGS, in order; without any, one unnamed variant of no extra flags. The model is the
    bench's to choose (--model, --shape): a --model among the engine flags is refused, not run past."""
    named = [spec.partition("=") for spec in args.variant]
    if any(not sep for _, sep, _ in named):
        raise SystemExit("--variant takes NAME=FLAGS")
    for flags in [args.engine_flags] + [flags for _, _, flags in named]:
        if any(word == "--model" or word.startswith("--model=") for word in shlex.split(flags)):
            raise SystemExit("--model in the engine flags: give the bench --model DIR (the server and the roofline)")
    return [(name, shlex.split(flags)) for name, _, flags in named] or [("", [])]


def served_model(args) -> str:
    return args.model or args.shape


def compare_variants(runs: list[dict]) -> None:
    """Each variant against the first, for every (target, dataset, caching) that ran them."""
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault((run["target"], run["dataset"], run["caching"], run["client_processes"]), []).append(run)
    lines = []
    for (target, dataset, caching, _), group in groups.items():
        base = group[0]
        for run in group[1:]:
            lines.append(
                f"{target:8s} {dataset:22s} caching {caching:3s} {run['variant']} vs {base['variant']}: output tok/s "
                f"{base['output_tok_per_s']:9.1f} -> {run['output_tok_per_s']:9.1f} "
                f"({run['output_tok_per_s'] / base['output_tok_per_s']:6.3f}x)   TPOT p50 "
                f"{base['tpot_s']['p50'] * 1e3:7.2f} -> {run['tpot_s']['p50'] * 1e3:7.2f} ms"
            )
    if lines:
        print("\n== variants against the first ==")
        print("\n".join(lines))


def compare(runs: list[dict]) -> None:
    """Caching on against off for each (target, dataset, variant) that ran both; then variants against the first."""
    compare_variants(runs)
    pairs = {}
    for run in runs:
        key = (run["target"], run["dataset"], run["client_processes"], run["variant"])
        pairs.setdefault(key, {})[run["caching"]] = run
    lines = []
    for (target, dataset, processes, _), both in pairs.items():
        if {"on", "off"} <= both.keys():
            on, off = both["on"], both["off"]
            lines.append(
                f"{target:8s} {dataset:22s} {processes} client(s)  TTFT p50 {off['ttft_s']['p50'] * 1e3:8.1f} -> {on['ttft_s']['p50'] * 1e3:8.1f} ms "
                f"({off['ttft_s']['p50'] / on['ttft_s']['p50']:5.2f}x)   output tok/s {off['output_tok_per_s']:8.1f} -> "
                f"{on['output_tok_per_s']:8.1f} ({on['output_tok_per_s'] / off['output_tok_per_s']:5.2f}x)   "
                f"cached {on['cached_tokens'] / max(on['prompt_tokens'], 1):.0%} of prompt tokens"
            )
    if lines:
        print("\n== prefix caching: off -> on ==")
        print("\n".join(lines))


def main(argv=None) -> None:
    args = parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M:%S")

    def save(runs: list[dict]) -> None:  # after every run: a run cut short by a time bound keeps what it measured
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(
                json.dumps({"command": sys.argv, "args": vars(args), "started": started, "runs": runs}, indent=1)
            )

    asyncio.run(main_async(args, save))
