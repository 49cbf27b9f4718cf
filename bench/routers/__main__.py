"""Routers in front of scaleout engines on a multi-turn workload, side by side in one run (python -m bench.routers).

Named configurations (--configs, comma-separated; the first three by default):

  smg-cache_aware          SMG (HTTP mode) `--policy cache_aware` in front of two stacks of one engine each: its
                           approximate tree of the request texts it routed
  smg-grpc-cache_aware     SMG in gRPC mode (`--worker-urls grpc://<engine>`, its own tokenizer from the model
                           folder) straight onto the same two engines' vLLM gRPC face, routing on the engines' own KV
                           events (VllmEngine.SubscribeKvEvents; every engine runs with --kv-events)
  envoy-hash               one stack with two engine replicas behind our own Envoy, balanced by consistent hash on
                           render's prefix hash (StackConfig replicas {"engine": 2}, the stack's default)
  smg-round_robin          SMG `--policy round_robin` in front of the two one-engine stacks: the no-affinity floor
  vllm-router-cache_aware  vllm-router `--policy cache_aware` in front of the two one-engine stacks

The router configurations share the two one-engine stacks; every phase sends its own conversations (fresh system
prompts and user turns, same lengths), so no phase finds another's prefixes cached. Phases alternate their order
round by round, so drift on a shared machine hits every configuration alike. Per configuration: TTFT p50/p90 over
every turn and over the turns after the first (where a cached history pays), the engines' own prefix-cache hit
rate and balance, 429 retries (bench/routers/workload.py), and what SMG's own metrics say of its choices and of
the KV events it applied. The table and the command go to stdout; --json keeps everything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from bench.routers.workload import cache_counters, cache_delta, grouped_conversations, run_conversations
from bench.serving.datasets import multi_turn
from bench.serving.metrics import percentile
from devstack.routers import Router, RouterConfig, start_side_by_side
from devstack.stack import Replica, Stack, StackConfig
from scaleout_common.models import resolve_model


@dataclass(frozen=True)
class Config:
    fleet: str  # "pair": two one-engine stacks; "hashed": one stack with two engines
    router: tuple[str, str] | None = None  # (kind, policy) in front of the pair
    grpc: bool = False  # the router drives the pair's engines over gRPC rather than the stacks over HTTP


CONFIGS = {
    "smg-cache_aware": Config("pair", ("smg", "cache_aware")),
    "smg-grpc-cache_aware": Config("pair", ("smg", "cache_aware"), grpc=True),
    "envoy-hash": Config("hashed"),
    "smg-round_robin": Config("pair", ("smg", "round_robin")),
    "vllm-router-cache_aware": Config("pair", ("vllm-router", "cache_aware")),
}
# SMG's own counters that tell why it routed as it did (cache_aware's branch) and what KV events it applied.
SMG_SERIES = ("smg_cache_aware_policy_branch_total", "smg_kv_event_batches_total", "smg_kv_events_unavailable")


def _engines(stacks: list[Stack]) -> list[Replica]:
    return [r for stack in stacks for r in stack.replicas if r.name.startswith("engine-")]


def _start(
    names: list[str], engine_args: list[str], queue_wait_s: str, logs: Path, running: ExitStack
) -> dict[str, tuple[str, list[Replica], Router | None]]:
    """Start what the configurations need; per name, (the URL clients talk to, the engines behind it, its router).
    With a gRPC configuration every engine publishes KV events, so all run the same flags."""
    fleets = {CONFIGS[n].fleet for n in names}
    if any(CONFIGS[n].grpc for n in names):
        engine_args = [*engine_args, "--kv-events"]
    plan = {"pair": [("pair1", 1), ("pair2", 1)], "hashed": [("hashed", 2)]}
    stacks = {}
    for fleet in sorted(fleets):
        for name, engines in plan[fleet]:
            replicas = {"render": 1, "engine": engines, "derender": 1, "chat": 1}
            config = StackConfig(
                port=0,
                replicas=replicas,
                log_dir=logs / name,
                service_args={"engine": engine_args},
                env={"SCALEOUT_MAX_QUEUE_WAIT_S": queue_wait_s},
            )
            stacks[name] = Stack(config)
            running.callback(stacks[name].stop)
    start_side_by_side(list(stacks.values()))
    targets = {}
    for name in names:
        config = CONFIGS[name]
        if config.router is None:
            targets[name] = (stacks["hashed"].rest_url, _engines([stacks["hashed"]]), None)
            continue
        engines = _engines([stacks["pair1"], stacks["pair2"]])
        kind, policy = config.router
        workers = [stacks["pair1"].rest_url, stacks["pair2"].rest_url]
        extra = []
        if config.grpc:  # SMG tokenizes and templates itself: the stacks' model folder
            workers = [f"grpc://127.0.0.1:{e.bound_port}" for e in engines]
            extra = ["--model-path", str(resolve_model(None))]
        router = Router(RouterConfig(kind, policy, workers, args=extra, log_path=logs / f"{name}.log"))
        running.enter_context(router)
        targets[name] = (router.url, engines, router)
    return targets


def _smg_counters(router: Router | None) -> dict[str, float]:
    """SMG_SERIES summed per series and label set without the worker label (empty for other routers)."""
    if router is None or router.config.kind != "smg":
        return {}
    sums: dict[str, float] = {}
    for line in router.metrics().splitlines():
        if line.startswith(SMG_SERIES):
            key, value = line.rsplit(" ", 1)
            name, _, labels = key.partition("{")
            kept = ",".join(p for p in labels.rstrip("}").split(",") if p and not p.startswith("worker="))
            sums[f"{name}{{{kept}}}"] = sums.get(f"{name}{{{kept}}}", 0.0) + float(value)
    return sums


def _phase(url: str, engines: list[Replica], model: str, args, seed: int) -> dict:
    conversations = grouped_conversations(
        args.conversations, args.system_prompts, args.turns, args.system_len, args.user_len, args.output_len, seed
    )
    before = cache_counters(engines)
    started = time.perf_counter()
    turns = asyncio.run(run_conversations(url, model, conversations, args.concurrency))
    results = [result for result, _ in turns]
    return {
        "seconds": time.perf_counter() - started,
        "retries_429": sum(retries for _, retries in turns),
        "ttft": [r.ttft for r in results if not r.error],
        "later_ttft": [r.ttft for i, r in enumerate(results) if not r.error and i % args.turns],
        "errors": [r.error for r in results if r.error],
        "cache": cache_delta(before, cache_counters(engines)),
    }


def _summary(phases: list[dict]) -> dict:
    ttft = [t for p in phases for t in p["ttft"]]
    later = [t for p in phases for t in p["later_ttft"]]
    queried = sum(p["cache"]["queried_tokens"] for p in phases)
    hit = sum(p["cache"]["hit_tokens"] for p in phases)
    shares = [p["cache"]["engine_share"] for p in phases]
    return {
        "requests": len(ttft),
        "errors": sum(len(p["errors"]) for p in phases),
        "retries_429": sum(p["retries_429"] for p in phases),
        "first_errors": [e for p in phases for e in p["errors"]][:3],
        "ttft_p50_ms": percentile(ttft, 50) * 1000,
        "ttft_p90_ms": percentile(ttft, 90) * 1000,
        "later_turns_ttft_p50_ms": percentile(later, 50) * 1000,
        "later_turns_ttft_p90_ms": percentile(later, 90) * 1000,
        "hit_rate": hit / queried if queried else float("nan"),
        "queried_tokens": queried,
        "engine_share": [sum(s[i] for s in shares) / len(shares) for i in range(len(shares[0]))],
    }


def _table(summaries: dict[str, dict]) -> str:
    head = (
        "| configuration | requests | errors | 429 retried | prefix-cache hit rate | TTFT p50 ms | p90 ms "
        "| turns 2+ p50 ms | turns 2+ p90 ms | engine split |"
    )
    rows = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, s in summaries.items():
        split = " / ".join(f"{share:.0%}" for share in s["engine_share"])
        rows.append(
            f"| {name} | {s['requests']} | {s['errors']} | {s['retries_429']} | {s['hit_rate']:.1%} | {s['ttft_p50_ms']:.0f} "
            f"| {s['ttft_p90_ms']:.0f} | {s['later_turns_ttft_p50_ms']:.0f} | {s['later_turns_ttft_p90_ms']:.0f} "
            f"| {split} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--configs", default="smg-cache_aware,smg-grpc-cache_aware,envoy-hash", help=f"of {', '.join(CONFIGS)}"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--conversations", type=int, default=6, help="per phase")
    parser.add_argument(
        "--system-prompts",
        type=int,
        default=3,
        help="groups of conversations sharing a system prompt (1: all share one, and SMG's cache_aware pins "
        "every conversation to one engine: see bench/routers/README.md)",
    )
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=3, help="conversations at once")
    parser.add_argument("--system-len", type=int, default=256, help="words of each system prompt")
    parser.add_argument("--user-len", type=int, default=48, help="words per user turn")
    parser.add_argument("--output-len", type=int, default=16, help="tokens per answer (EOS ignored)")
    parser.add_argument(
        "--engine-args",
        default="--num-kv-blocks 768",
        help="every engine's flags (default: 12,288 tokens of KV, ~0.55 GB, so four engines fit a small machine)",
    )
    parser.add_argument(
        "--max-queue-wait-s",
        default="0",
        help="the engines' queue-wait budget (SCALEOUT_MAX_QUEUE_WAIT_S; 0: none). Off by default: on a shared "
        "small machine the host's load, not the router, makes the engines refuse (429) what they would queue",
    )
    parser.add_argument("--json", type=Path, help="write the results here (e.g. bench/routers/results/cpu.json)")
    args = parser.parse_args()
    names = args.configs.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown configurations {unknown}; known: {', '.join(CONFIGS)}")
    command = "python -m bench.routers " + shlex.join(sys.argv[1:])
    loads: list[float] = []
    with ExitStack() as running:
        logs = Path(tempfile.mkdtemp(prefix="bench-routers-"))
        targets = _start(names, shlex.split(args.engine_args), args.max_queue_wait_s, logs, running)
        with urllib.request.urlopen(targets[names[0]][0] + "/v1/models", timeout=10) as answer:
            model = json.loads(answer.read())["data"][0]["id"]
        for url, _, _ in targets.values():  # warm-up: every engine's first steps, on no measured prefix
            asyncio.run(run_conversations(url, model, multi_turn(4, 1, 8, 8, 4, 0, True, seed=-1), 2))
        phases: dict[str, list[dict]] = {name: [] for name in names}
        for number in range(args.rounds):
            for name in names[number % len(names) :] + names[: number % len(names)]:
                url, engines, _ = targets[name]
                seed = zlib.crc32(f"{name}/{number}".encode())
                phases[name].append(_phase(url, engines, model, args, seed))
                loads.append(os.getloadavg()[0])
                print(f"round {number + 1} {name}: {phases[name][-1]['seconds']:.1f}s", file=sys.stderr, flush=True)
                summaries = {n: _summary(p) | {"smg": _smg_counters(targets[n][2])} for n, p in phases.items() if p}
                _write(args, command, summaries, phases, loads)  # after every phase: a cut run keeps what it did
    print(f"$ {command}\n\n{_table(summaries)}")


def _write(args, command: str, summaries: dict, phases: dict, loads: list[float]) -> None:
    if not args.json:
        return
    args.json.parent.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "loadavg_after_each_phase": loads, "platform": platform.platform()}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True)
    record = {
        "command": command,
        "commit": commit.stdout.strip(),
        "machine": machine,
        "args": vars(args) | {"json": str(args.json)},
        "summary": summaries,
        "phases": phases,
        "table": _table(summaries),
    }
    args.json.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
