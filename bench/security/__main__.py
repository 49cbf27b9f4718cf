"""What the secure edge costs, and what the body limit saves (python -m bench.security).

1. Throughput: one-hop streamed chat (POST /v1/chat/completions {"stream": true}, `--max-tokens` tokens, EOS
   ignored) at `--concurrency` streams, through a plain stack and through a secure one (TLS at the gateway,
   mTLS between every hop, API keys). Both stacks run at once; rounds alternate plain/secure so drift on a
   shared machine hits both alike. Prints aggregate output tokens/s and median time to first token per stack,
   and secure/plain (goal >= 0.9).
2. Memory: Envoy's resident memory before, at peak and after `--attackers` concurrent 100 MB bodies (sent with a
   content-length, and chunked), against the configured heap limit.
3. Isolation: the gateway's memory and a bystander's latency under each attack of issue 36, against no attack
   (bench/security/isolation.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import threading
import time
from pathlib import Path

import httpx

from bench.security.isolation import add_arguments, isolation
from devstack.stack import Stack, StackConfig
from gateway.limits import Limits

QUESTION = "Write a long story about a lighthouse keeper."
RESULTS = Path(__file__).with_name("results")


def _stream(client: httpx.Client, url: str, max_tokens: int, headers: dict) -> tuple[float, int, float]:
    """(time to first content event, completion tokens, total seconds) for one streamed chat."""
    body = {"messages": [{"role": "user", "content": QUESTION}], "max_tokens": max_tokens, "ignore_eos": True}
    body |= {"stream": True, "stream_options": {"include_usage": True}, "temperature": 0}
    started, first, tokens = time.perf_counter(), None, 0
    with client.stream("POST", url + "/v1/chat/completions", json=body, headers=headers, timeout=600) as answer:
        answer.raise_for_status()
        for line in answer.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if first is None and event.get("choices") and event["choices"][0]["delta"].get("content"):
                first = time.perf_counter() - started
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
    return first or 0.0, tokens, time.perf_counter() - started


def _phase(stack: Stack, concurrency: int, per_stream: int, max_tokens: int) -> dict:
    headers = {"authorization": f"Bearer {stack.api_key}"} if stack.api_key else {}
    verify = str(stack.ca_cert) if stack.ca_cert else True
    samples: list[tuple[float, int, float]] = []
    lock = threading.Lock()

    def worker():
        with httpx.Client(verify=verify) as client:
            for _ in range(per_stream):
                sample = _stream(client, stack.rest_url, max_tokens, headers)
                with lock:
                    samples.append(sample)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return {
        "tokens_per_s": sum(s[1] for s in samples) / elapsed,
        "ttft_median_s": statistics.median(s[0] for s in samples),
        "requests": len(samples),
    }


def throughput(args) -> dict:
    common = dict(port=0, log_dir=Path(args.log_dir) / "throughput")
    plain = Stack(StackConfig(**common))
    secure = Stack(StackConfig(**common, secure=True))
    results: dict[str, list[dict]] = {"plain": [], "secure": []}
    with plain, secure:
        for stack in (plain, secure):  # warm-up
            _phase(stack, args.concurrency, 1, 8)
        for round_ in range(args.rounds):
            order = [("plain", plain), ("secure", secure)]
            for name, stack in order if round_ % 2 == 0 else order[::-1]:
                results[name].append(_phase(stack, args.concurrency, args.per_stream, args.max_tokens))
                print(f"round {round_} {name:<7} {results[name][-1]}", flush=True)
    summary = {
        name: {
            "tokens_per_s": statistics.median(p["tokens_per_s"] for p in phases),
            "ttft_median_s": statistics.median(p["ttft_median_s"] for p in phases),
        }
        for name, phases in results.items()
    }
    summary["secure_over_plain"] = summary["secure"]["tokens_per_s"] / summary["plain"]["tokens_per_s"]
    return {"phases": results, "summary": summary}


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


def memory(args) -> dict:
    limits = Limits()
    config = StackConfig(
        port=0, replicas={"render": 1, "engine": 0, "derender": 0, "chat": 0}, log_dir=Path(args.log_dir) / "memory"
    )
    out = {"heap_limit_mib": limits.max_heap_mb, "body_limit_mib": limits.max_body_mb}
    with Stack(config) as stack, httpx.Client(timeout=600) as client:
        url = stack.rest_url + "/v1/chat/completions/render"
        payload = b'{"messages":[{"role":"user","content":"' + b"a" * (100 << 20) + b'"}]}'

        def chunked():
            for start in range(0, len(payload), 1 << 20):
                yield payload[start : start + (1 << 20)]

        for mode, body in (("content-length", lambda: payload), ("chunked", chunked)):
            before, peak, codes = _rss_mib(stack.envoy.pid), 0.0, []

            def attack(body=body):
                try:
                    codes.append(
                        client.post(url, content=body(), headers={"content-type": "application/json"}).status_code
                    )
                except httpx.HTTPError as error:
                    codes.append(type(error).__name__)

            threads = [threading.Thread(target=attack) for _ in range(args.attackers)]
            for thread in threads:
                thread.start()
            while any(t.is_alive() for t in threads):
                peak = max(peak, _rss_mib(stack.envoy.pid))
                time.sleep(0.02)
            time.sleep(1)
            out[mode] = {
                "rss_before_mib": round(before, 1),
                "rss_peak_mib": round(peak, 1),
                "rss_after_mib": round(_rss_mib(stack.envoy.pid), 1),
                "answers": codes,
            }
            print(f"memory {mode}: {out[mode]}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--per-stream", type=int, default=3, help="requests per client per round")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--attackers", type=int, default=4)
    parser.add_argument("--log-dir", default="/tmp/bench-security")
    parser.add_argument("--only", choices=["throughput", "memory", "isolation"], default=None)
    add_arguments(parser)
    args = parser.parse_args()
    report = {
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, {platform.platform()}",
        "args": vars(args),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    if args.only in (None, "throughput"):
        report["throughput"] = throughput(args)
        s = report["throughput"]["summary"]
        print(
            f"\none-hop streamed chat, {args.concurrency} streams x {args.max_tokens} tokens:\n"
            f"  plain   {s['plain']['tokens_per_s']:8.1f} tok/s   TTFT {s['plain']['ttft_median_s'] * 1000:6.0f} ms\n"
            f"  secure  {s['secure']['tokens_per_s']:8.1f} tok/s   TTFT {s['secure']['ttft_median_s'] * 1000:6.0f} ms\n"
            f"  secure / plain = {s['secure_over_plain']:.3f}  (TLS + mTLS + API keys; goal >= 0.9)"
        )
    if args.only in (None, "memory"):
        report["memory"] = memory(args)
    if args.only in (None, "isolation"):
        report["isolation"] = isolation(args)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"written: {path}")


if __name__ == "__main__":
    main()
