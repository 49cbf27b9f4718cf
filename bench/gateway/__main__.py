"""What the gateway adds to a one-hop streamed chat: Envoy's REST SSE path against the pipeline service called
directly over gRPC, same stack, same run, side by side (python -m bench.gateway).

One stack (Envoy + render + engine + derender + chat, default model). Paths, all streaming the same greedy chat
request (`max_tokens` tokens, EOS ignored, so every request makes exactly that many):

  rest/envoy      POST /v1/chat/completions {"stream": true} through Envoy (HTTP/1.1, SSE), read with httpx
  openai/direct   OpenAIService.ChatCompletions over gRPC on the chat service's own port: the same server code
                  and the same SSE bytes, without Envoy (the baseline for the REST path)
  typed/direct    ChatService.StreamChatCompletion over gRPC on the chat service's own port (typed chunks)
  typed/envoy     the same typed RPC through Envoy's gRPC pass-through

Per request: time to first token (request sent -> first event with a token), per-token latency (first -> last
token event, divided by the tokens between), and tokens/s. Per path and concurrency: medians and p90 of those,
and aggregate output tokens/s over the phase. Phases alternate path order round by round, so drift on a shared
machine hits every path alike. Prints rest/envoy against openai/direct (the gateway's added latency) and the
streaming path's tokens/s ratio (goal >= 0.9).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
from google.api import httpbody_pb2
from google.protobuf import struct_pb2

from devstack.stack import Stack, StackConfig
from scaleout.v1 import chat_pb2_grpc, common_pb2, openai_pb2_grpc, render_pb2

QUESTIONS = [
    "Count from 1 to 100, separated by commas.",
    "Write a long story about a lighthouse keeper.",
    "List the countries of Europe with their capitals.",
    "Explain how a bicycle works, step by step.",
]
PATHS = ("rest/envoy", "openai/direct", "typed/direct", "typed/envoy")


@dataclass
class Sample:
    ttft: float  # seconds: request sent -> first token event
    token_times: list[float]  # arrival of every event that carried tokens (seconds since the request)
    tokens: int  # completion tokens (usage)
    total: float  # seconds: request sent -> stream closed

    @property
    def per_token(self) -> float:
        """Seconds between token events after the first (the decode cadence a client sees)."""
        first, last = self.token_times[0], self.token_times[-1]
        return (last - first) / max(1, self.tokens - 1)


def _body(i: int, max_tokens: int) -> dict:
    return {
        "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def _events(pieces):
    """SSE `data:` payloads as they complete, from an iterator of byte pieces."""
    buffer = b""
    for piece in pieces:
        buffer += piece
        while (end := buffer.find(b"\n\n")) >= 0:
            event, buffer = buffer[:end], buffer[end + 2 :]
            if event.startswith(b"data: "):
                yield event[6:]


def _from_sse(start: float, pieces) -> Sample:
    times, tokens = [], 0
    for data in _events(pieces):
        if data == b"[DONE]":
            break
        event = json.loads(data)
        if "error" in event:
            raise RuntimeError(event["error"])
        if any(c["delta"].get("content") for c in event["choices"]):
            times.append(time.perf_counter() - start)
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
    return Sample(times[0], times, tokens, time.perf_counter() - start)


class Client:
    """One worker's connections: an HTTP/1.1 keep-alive client for Envoy and gRPC channels."""

    def __init__(self, gateway: str, chat: str):
        self.http = httpx.Client(base_url=f"http://{gateway}", timeout=600)
        self.channels = {"envoy": grpc.insecure_channel(gateway), "direct": grpc.insecure_channel(chat)}

    def close(self) -> None:
        self.http.close()
        for channel in self.channels.values():
            channel.close()

    def one(self, path: str, i: int, max_tokens: int) -> Sample:
        body = _body(i, max_tokens)
        start = time.perf_counter()
        if path == "rest/envoy":
            with self.http.stream("POST", "/v1/chat/completions", json=body) as response:
                response.raise_for_status()
                return _from_sse(start, response.iter_raw())
        if path == "openai/direct":
            stub = openai_pb2_grpc.OpenAIServiceStub(self.channels["direct"])
            request = httpbody_pb2.HttpBody(content_type="application/json", data=json.dumps(body).encode())
            return _from_sse(start, (event.data for event in stub.ChatCompletions(request, timeout=600)))
        stub = chat_pb2_grpc.ChatServiceStub(self.channels[path.split("/")[1]])
        times, tokens = [], 0
        for chunk in stub.StreamChatCompletion(_typed(body), timeout=600):
            if chunk.HasField("error"):
                raise RuntimeError(chunk.error)
            if any(c.delta.content for c in chunk.choices):
                times.append(time.perf_counter() - start)
            if chunk.HasField("usage"):
                tokens = chunk.usage.completion_tokens
        return Sample(times[0], times, tokens, time.perf_counter() - start)


def _typed(body: dict) -> render_pb2.RenderChatRequest:
    (message,) = body["messages"]
    return render_pb2.RenderChatRequest(
        messages=[common_pb2.ChatMessage(role="user", content=struct_pb2.Value(string_value=message["content"]))],
        max_tokens=body["max_tokens"],
        temperature=0,
        ignore_eos=True,
        stream_options=render_pb2.StreamOptions(include_usage=True),
    )


def run_phase(clients: list[Client], path: str, requests: int, max_tokens: int) -> tuple[list[Sample], float]:
    """`requests` requests on `path` from len(clients) workers; (samples, wall seconds)."""
    lock, samples, errors = threading.Lock(), [], []
    counter = iter(range(requests))

    def worker(client: Client) -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            try:
                sample = client.one(path, i, max_tokens)
            except Exception as error:  # reported after the phase
                errors.append(error)
                return
            with lock:
                samples.append(sample)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"{path}: {errors[0]!r}")
    return samples, time.perf_counter() - start


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarize(samples: list[Sample], wall: float) -> dict:
    ttft = [s.ttft * 1000 for s in samples]
    per_token = [s.per_token * 1000 for s in samples]
    tokens = sum(s.tokens for s in samples)
    return {
        "requests": len(samples),
        "tokens": tokens,
        "ttft_ms_p50": statistics.median(ttft),
        "ttft_ms_p90": _p(ttft, 0.9),
        "per_token_ms_p50": statistics.median(per_token),
        "per_token_ms_p90": _p(per_token, 0.9),
        "stream_tok_s_p50": statistics.median(s.tokens / s.total for s in samples),
        "tok_s": tokens / wall,
    }


def _git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", default="1,8", help="comma-separated client counts")
    parser.add_argument("--requests", type=int, default=16, help="requests per path and concurrency (all rounds)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per concurrency; path order rotates")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens every request generates (EOS ignored)")
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated subset of " + ", ".join(PATHS))
    parser.add_argument("--model", default=None, help="local HF model folder (default: the embedded model)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    paths = args.paths.split(",")
    levels = [int(c) for c in args.concurrency.split(",")]

    logs = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    print(
        f"workload: one-hop streamed chat, {args.max_tokens} tokens per request (greedy, EOS ignored), "
        f"{args.requests} requests per path at each concurrency in {args.rounds} rounds; logs in {logs}",
        flush=True,
    )
    results: dict = {
        "command": "python -m bench.gateway " + " ".join(_argv(args)),
        "commit": _git_commit(),
        "machine": f"{platform.machine()} {platform.processor() or ''} {_cores()} cores".strip(),
        "max_tokens": args.max_tokens,
        "levels": {},
    }
    with Stack(StackConfig(port=0, model=args.model, log_dir=logs)) as stack:
        chat = next(r for r in stack.replicas if r.name.startswith("chat-"))
        chat_target = f"{stack.config.host}:{chat.port}"
        for concurrency in levels:
            clients = [Client(stack.gateway, chat_target) for _ in range(concurrency)]
            for path in paths:  # warm-up: connections, lazy initialisation, the prefix cache
                run_phase(clients, path, concurrency, args.max_tokens)
            collected: dict[str, tuple[list[Sample], float]] = {p: ([], 0.0) for p in paths}
            per_round = max(concurrency, args.requests // args.rounds)
            for round_index in range(args.rounds):
                order = paths[round_index % len(paths) :] + paths[: round_index % len(paths)]
                for path in order:
                    samples, wall = run_phase(clients, path, per_round, args.max_tokens)
                    kept, total_wall = collected[path]
                    collected[path] = (kept + samples, total_wall + wall)
            for client in clients:
                client.close()
            level = {path: summarize(*collected[path]) for path in paths}
            results["levels"][str(concurrency)] = level
            print_level(concurrency, level)
    ratios = print_ratios(results)
    results["ratios"] = ratios
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def _argv(args) -> list[str]:
    out = [f"--concurrency {args.concurrency}", f"--requests {args.requests}", f"--rounds {args.rounds}"]
    out.append(f"--max-tokens {args.max_tokens}")
    if args.paths != ",".join(PATHS):
        out.append(f"--paths {args.paths}")
    if args.json:
        out.append(f"--json {args.json}")
    return out


def _cores() -> int:
    return len(os.sched_getaffinity(0))


def print_level(concurrency: int, level: dict) -> None:
    print(f"\nconcurrency {concurrency}")
    header = f"{'path':<14} {'reqs':>5} {'TTFT p50':>9} {'TTFT p90':>9} {'tok ms p50':>10} {'tok ms p90':>10}"
    print(header + f" {'stream tok/s':>12} {'tok/s':>8}")
    for path, row in level.items():
        print(
            f"{path:<14} {row['requests']:>5} {row['ttft_ms_p50']:>9.1f} {row['ttft_ms_p90']:>9.1f} "
            f"{row['per_token_ms_p50']:>10.2f} {row['per_token_ms_p90']:>10.2f} "
            f"{row['stream_tok_s_p50']:>12.1f} {row['tok_s']:>8.1f}",
            flush=True,
        )


def print_ratios(results: dict) -> dict:
    """The gateway's REST path against the same RPC called directly (and typed gRPC through Envoy vs direct)."""
    ratios = {}
    print("\ngateway added (rest/envoy vs openai/direct; typed/envoy vs typed/direct):")
    for concurrency, level in results["levels"].items():
        for through, direct in (("rest/envoy", "openai/direct"), ("typed/envoy", "typed/direct")):
            if through not in level or direct not in level:
                continue
            a, b = level[through], level[direct]
            row = {
                "ttft_added_ms": a["ttft_ms_p50"] - b["ttft_ms_p50"],
                "ttft_ratio": a["ttft_ms_p50"] / b["ttft_ms_p50"],
                "per_token_added_ms": a["per_token_ms_p50"] - b["per_token_ms_p50"],
                "per_token_ratio": a["per_token_ms_p50"] / b["per_token_ms_p50"],
                "tok_s_ratio": a["tok_s"] / b["tok_s"],
            }
            ratios[f"{through} vs {direct} @ {concurrency}"] = row
            print(
                f"  c={concurrency:<3} {through} vs {direct}: TTFT {row['ttft_added_ms']:+.1f} ms "
                f"(x{row['ttft_ratio']:.3f}), per token {row['per_token_added_ms']:+.2f} ms "
                f"(x{row['per_token_ratio']:.3f}), tokens/s x{row['tok_s_ratio']:.3f}"
                + ("  (goal >= 0.9)" if through == "rest/envoy" else ""),
                flush=True,
            )
    return ratios


if __name__ == "__main__":
    main()
