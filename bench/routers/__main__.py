"""Routers in front of scaleout engines on a multi-turn workload, side by side in one run (python -m bench.routers).

Named configurations (--configs, comma-separated; the first two by default):

  smg-cache_aware          SMG (HTTP mode) `--policy cache_aware` in front of two stacks of one engine each
  envoy-hash               one stack with two engine replicas behind our own Envoy, balanced by consistent hash on
                           render's prefix hash (StackConfig replicas {"engine": 2}, the stack's default)
  vllm-router-cache_aware  vllm-router `--policy cache_aware` in front of the two one-engine stacks
  smg-round_robin          SMG `--policy round_robin` there: the no-affinity baseline

The router configurations share the two one-engine stacks; every phase sends its own conversations (fresh system
prompt and user turns, same lengths), so no phase finds another's prefixes cached. Phases alternate their order
round by round, so drift on a shared machine hits every configuration alike. Per configuration: TTFT p50/p90 over
every turn and over the turns after the first (where a cached history pays), and the engines' own prefix-cache hit
rate and balance (bench/routers/workload.py). The table and the command go to stdout; --json keeps everything.
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

from bench.routers.workload import cache_counters, cache_delta, run_conversations
from bench.serving.datasets import multi_turn
from bench.serving.metrics import percentile
from devstack.routers import Router, RouterConfig, start_side_by_side
from devstack.stack import Replica, Stack, StackConfig


@dataclass(frozen=True)
class Config:
    fleet: str  # "pair": two one-engine stacks; "hashed": one stack with two engines
    router: tuple[str, str] | None = None  # (kind, policy) in front of the pair


CONFIGS = {
    "smg-cache_aware": Config("pair", ("smg", "cache_aware")),
    "envoy-hash": Config("hashed"),
    "vllm-router-cache_aware": Config("pair", ("vllm-router", "cache_aware")),
    "smg-round_robin": Config("pair", ("smg", "round_robin")),
}


def _engines(stacks: list[Stack]) -> list[Replica]:
    return [r for stack in stacks for r in stack.replicas if r.name.startswith("engine-")]


def _start(
    names: list[str], engine_args: list[str], logs: Path, running: ExitStack
) -> dict[str, tuple[str, list[Replica]]]:
    """Start what the configurations need; per name, (the URL clients talk to, the engines behind it)."""
    fleets = {CONFIGS[n].fleet for n in names}
    plan = {"pair": [("pair1", 1), ("pair2", 1)], "hashed": [("hashed", 2)]}
    stacks = {}
    for fleet in sorted(fleets):
        for name, engines in plan[fleet]:
            replicas = {"render": 1, "engine": engines, "derender": 1, "chat": 1}
            config = StackConfig(port=0, replicas=replicas, log_dir=logs / name, service_args={"engine": engine_args})
            stacks[name] = Stack(config)
            running.callback(stacks[name].stop)
    start_side_by_side(list(stacks.values()))
    targets = {}
    for name in names:
        config = CONFIGS[name]
        if config.router is None:
            targets[name] = (stacks["hashed"].rest_url, _engines([stacks["hashed"]]))
            continue
        pair = [stacks["pair1"], stacks["pair2"]]
        kind, policy = config.router
        router = Router(RouterConfig(kind, policy, [s.rest_url for s in pair], log_path=logs / f"{name}.log"))
        running.enter_context(router)
        targets[name] = (router.url, _engines(pair))
    return targets


def _phase(url: str, engines: list[Replica], model: str, args, seed: int) -> dict:
    conversations = multi_turn(
        args.conversations, args.turns, args.system_len, args.user_len, args.output_len, 0, True, seed=seed
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
        "hit_rate": hit / queried if queried else float("nan"),
        "queried_tokens": queried,
        "engine_share": [sum(s[i] for s in shares) / len(shares) for i in range(len(shares[0]))],
    }


def _table(summaries: dict[str, dict]) -> str:
    head = "| configuration | requests | errors | 429 retried | prefix-cache hit rate | TTFT p50 ms | p90 ms | turns 2+ p50 ms | engine split |"
    rows = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, s in summaries.items():
        split = " / ".join(f"{share:.0%}" for share in s["engine_share"])
        rows.append(
            f"| {name} | {s['requests']} | {s['errors']} | {s['retries_429']} | {s['hit_rate']:.1%} | {s['ttft_p50_ms']:.0f} "
            f"| {s['ttft_p90_ms']:.0f} | {s['later_turns_ttft_p50_ms']:.0f} | {split} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="smg-cache_aware,envoy-hash", help=f"of {', '.join(CONFIGS)}")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--conversations", type=int, default=8, help="per phase")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=4, help="conversations at once")
    parser.add_argument("--system-len", type=int, default=256, help="words of the shared system prompt")
    parser.add_argument("--user-len", type=int, default=48, help="words per user turn")
    parser.add_argument("--output-len", type=int, default=16, help="tokens per answer (EOS ignored)")
    parser.add_argument(
        "--engine-args",
        default="--num-kv-blocks 768",
        help="every engine's flags (default: 12,288 tokens of KV, ~0.55 GB, so four engines fit a small machine)",
    )
    parser.add_argument("--json", type=Path, help="write the results here (e.g. bench/routers/results/cpu.json)")
    args = parser.parse_args()
    names = args.configs.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown configurations {unknown}; known: {', '.join(CONFIGS)}")
    command = "python -m bench.routers " + shlex.join(sys.argv[1:])
    with ExitStack() as running:
        targets = _start(names, shlex.split(args.engine_args), Path(tempfile.mkdtemp(prefix="bench-routers-")), running)
        with urllib.request.urlopen(targets[names[0]][0] + "/v1/models", timeout=10) as answer:
            model = json.loads(answer.read())["data"][0]["id"]
        for url, _ in targets.values():  # warm-up: every engine's first steps, on no measured prefix
            asyncio.run(run_conversations(url, model, multi_turn(4, 1, 8, 8, 4, 0, True, seed=-1), 2))
        phases: dict[str, list[dict]] = {name: [] for name in names}
        for number in range(args.rounds):
            for name in names[number % len(names) :] + names[: number % len(names)]:
                url, engines = targets[name]
                seed = zlib.crc32(f"{name}/{number}".encode())
                phases[name].append(_phase(url, engines, model, args, seed))
                print(f"round {number + 1} {name}: {phases[name][-1]['seconds']:.1f}s", file=sys.stderr, flush=True)
    summaries = {name: _summary(p) for name, p in phases.items()}
    table = _table(summaries)
    print(f"$ {command}\n\n{table}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        machine = {"cpus": os.cpu_count(), "loadavg": os.getloadavg(), "platform": platform.platform()}
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True
        ).stdout.strip()
        record = {
            "command": command,
            "commit": commit,
            "machine": machine,
            "args": vars(args) | {"json": str(args.json)},
        }
        args.json.write_text(json.dumps(record | {"summary": summaries, "phases": phases, "table": table}, indent=1))


if __name__ == "__main__":
    main()
