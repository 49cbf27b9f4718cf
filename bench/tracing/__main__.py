"""Throughput with tracing on vs off, same workload, one run (python -m bench.tracing).

Two whole stacks (Envoy + render + engine + derender + chat, default model, metrics on in both) run side by
side: one with tracing off, one exporting every span over OTLP/gRPC to a collector stub in this process
(it receives and counts, as a collector would). Rounds alternate off/on so drift on a shared machine hits
both alike. A round is a fixed batch of one-hop chat requests from `--concurrency` clients, alternating REST
unary (`/v1/chat/completions`) and gRPC streamed (`StreamChatCompletion`). Prints per-round and total
requests/s and output tokens/s, and the on/off ratio (goal >= 0.95).
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import requests
from google.protobuf import struct_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from devstack.stack import Stack, StackConfig
from scaleout.v1 import chat_pb2_grpc, common_pb2, render_pb2

QUESTIONS = [
    "What is the capital of France?",
    "Name three primary colors.",
    "Say hello in Spanish.",
    "What is two plus two?",
    "Give me a synonym for fast.",
]


class CollectorStub(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace receiver that only counts spans."""

    def __init__(self):
        self.spans = 0
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def Export(self, request, context):
        count = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        with self._lock:
            self.spans += count
        return trace_service_pb2.ExportTraceServiceResponse()


def one_request(stack: Stack, channel: grpc.Channel, i: int, max_tokens: int) -> int:
    """One chat request; returns its output tokens."""
    question = QUESTIONS[i % len(QUESTIONS)]
    if i % 2 == 0:
        body = {"messages": [{"role": "user", "content": question}], "temperature": 0, "max_tokens": max_tokens}
        answer = requests.post(stack.rest_url + "/v1/chat/completions", json=body, timeout=300)
        answer.raise_for_status()
        return answer.json()["usage"]["completion_tokens"]
    request = render_pb2.RenderChatRequest(
        messages=[common_pb2.ChatMessage(role="user", content=struct_pb2.Value(string_value=question))],
        temperature=0,
        max_tokens=max_tokens,
        stream_options=render_pb2.StreamOptions(include_usage=True),
    )
    chunks = list(chat_pb2_grpc.ChatServiceStub(channel).StreamChatCompletion(request, timeout=300))
    return next(c.usage.completion_tokens for c in reversed(chunks) if c.HasField("usage"))


def run_round(stack: Stack, requests_per_round: int, concurrency: int, max_tokens: int) -> tuple[float, int]:
    """(seconds, output tokens) for one round of `requests_per_round` requests."""
    counter = itertools.count()
    tokens = [0] * concurrency

    def client(slot: int) -> None:
        with grpc.insecure_channel(stack.gateway) as channel:
            while (i := next(counter)) < requests_per_round:
                tokens[slot] += one_request(stack, channel, i, max_tokens)

    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(slot,)) for slot in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, sum(tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per setting (alternating off/on)")
    parser.add_argument("--requests", type=int, default=24, help="chat requests per round")
    parser.add_argument("--concurrency", type=int, default=4, help="clients in flight")
    parser.add_argument("--max-tokens", type=int, default=16, help="max_tokens of every request")
    parser.add_argument("--model", default=None, help="local HF model folder (default: the embedded model)")
    args = parser.parse_args()

    collector = CollectorStub()
    collector.server.start()
    logs = Path(tempfile.mkdtemp(prefix="bench-tracing-"))
    tracing_on = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_SDK_DISABLED": "false",
    }
    tracing_off = {"OTEL_SDK_DISABLED": "true"}
    configs = {
        name: StackConfig(port=0, model=args.model, env=env, log_dir=logs / name)
        for name, env in (("off", tracing_off), ("on", tracing_on))
    }
    print(
        f"workload: {args.requests} one-hop chat requests per round (REST unary / gRPC streamed, alternating), "
        f"concurrency {args.concurrency}, max_tokens {args.max_tokens}, {args.rounds} rounds per setting; "
        f"logs in {logs}",
        flush=True,
    )
    totals = {"off": [0.0, 0, 0], "on": [0.0, 0, 0]}  # seconds, requests, tokens
    with Stack(configs["off"]) as off, Stack(configs["on"]) as on:
        stacks = {"off": off, "on": on}
        for stack in stacks.values():  # warm-up: first requests pay for lazy initialisation
            run_round(stack, args.concurrency, args.concurrency, args.max_tokens)
        print(f"{'round':>5} {'tracing':>7} {'req/s':>8} {'tok/s':>8}")
        for round_index in range(args.rounds):
            order = ("off", "on") if round_index % 2 == 0 else ("on", "off")
            for name in order:
                seconds, tokens = run_round(stacks[name], args.requests, args.concurrency, args.max_tokens)
                total = totals[name]
                total[0] += seconds
                total[1] += args.requests
                total[2] += tokens
                print(
                    f"{round_index:>5} {name:>7} {args.requests / seconds:>8.2f} {tokens / seconds:>8.1f}", flush=True
                )
        time.sleep(6)  # Envoy and the batch processors flush within ~5 s
    collector.server.stop(0)
    rate = {name: (t[1] / t[0], t[2] / t[0]) for name, t in totals.items()}
    ratio = rate["on"][0] / rate["off"][0]
    print(f"tracing off: {rate['off'][0]:.2f} req/s, {rate['off'][1]:.1f} tok/s")
    print(f"tracing on:  {rate['on'][0]:.2f} req/s, {rate['on'][1]:.1f} tok/s  ({collector.spans} spans exported)")
    print(f"throughput ratio on/off: {ratio:.3f} (goal >= 0.95)")


if __name__ == "__main__":
    main()
