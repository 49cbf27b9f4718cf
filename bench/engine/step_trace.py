"""What the step loop does under a closed-loop load, in process: every step call classified (decode run,
mixed, prefill, single decode) with its device steps, rows, prefill tokens and time, per engine configuration.

    python -m bench.engine.step_trace --device cuda --shape llama-1b --streams 256 \
        --configs "--max-model-len 2048;--max-model-len 2048 --max-num-batched-tokens 8192"

Configurations are `;`-separated engine flag strings, measured one after another on the same model.
`--multiturn N` drives N four-turn conversations behind one shared 1,000-token system prompt instead (64-token
user turns and answers, bench/serving's multi-turn set) and adds each turn's time in the queue and in prefill.
`--profile K` (CUDA) also runs torch.profiler on the step thread until K mixed calls and K decode runs (after a
few of each) were seen, and prints per kind the calls' wall time against the GPU's kernel time and the host
calls that took the most time; `--trace-dir D` also writes the first profiled call of each kind as a Chrome trace
(D/mixed.json, D/decode_run.json, a later configuration's in their place: chrome://tracing or Perfetto show
where the GPU waits).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict

import torch

from bench.engine.isolate import in_child
from bench.engine.run import closed_loop, in_process_request, make_requests, release
from bench.engine.shapes import build_model, shape_vocab
from bench.serving.datasets import multi_turn
from bench.serving.metrics import percentile
from engine_svc.__main__ import make_parser
from engine_svc.scheduling.admission import admit
from engine_svc.serving.loader import build_engine, pick_dtype
from engine_svc.serving.streaming import stream_responses
from scaleout.v1 import common_pb2, engine_pb2


class StepTrace:
    """Wraps an engine's scheduler and step so every step call leaves (kind, device steps, rows, prefill
    tokens, seconds)."""

    def __init__(self, engine, profile: int = 0, trace_dir: str | None = None):
        self.records: list[tuple[str, int, int, int, float]] = []
        schedule, step, self.chunks = engine.scheduler.schedule, engine._step, []
        self.profiles = {kind: StepProfile(profile) for kind in ("mixed", "decode run")} if profile else {}

        def traced_schedule():
            self.chunks = schedule()
            return self.chunks

        def traced_step(outputs):
            self.chunks, before, start = [], engine.steps, time.perf_counter()
            profiler = None
            if not all(p.done for p in self.profiles.values()):  # on the step thread: the profiler records it
                activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
                profiler = torch.profiler.profile(activities=activities)
                profiler.__enter__()
            step(outputs)  # a step call ends with its tokens read: the GPU is done with it
            seconds = time.perf_counter() - start
            if profiler is not None:
                profiler.__exit__(None, None, None)
            if not self.chunks:
                return
            decodes = sum(c.num_tokens == 1 and c.samples for c in self.chunks)
            prefill = sum(c.num_tokens for c in self.chunks) - decodes
            steps = engine.steps - before + 1
            kind = "decode run" if steps > 1 else "prefill" if not decodes else "mixed" if prefill else "decode"
            self.records.append((kind, steps, len(self.chunks), prefill, seconds))
            if profiler is not None and kind in self.profiles:
                first = self.profiles[kind].keep(profiler.key_averages(), seconds, steps)
                if first and trace_dir:
                    profiler.export_chrome_trace(f"{trace_dir}/{kind.replace(' ', '_')}.json")

        engine.scheduler.schedule, engine._step = traced_schedule, traced_step
        self.detach = lambda: (delattr(engine.scheduler, "schedule"), delattr(engine, "_step"))

    def report(self, wall: float) -> str:
        profiles = [f"--- profile of {kind} calls: {p.report()}" for kind, p in self.profiles.items() if p.done]
        by_kind = defaultdict(lambda: [0, 0, 0, 0, 0.0])
        for kind, steps, rows, prefill, seconds in self.records:
            entry = by_kind[kind]
            for i, value in enumerate((1, steps, rows, prefill, seconds)):
                entry[i] += value
        busy = sum(r[4] for r in self.records)
        lines = [f"    {'kind':<11}{'calls':>7}{'steps':>7}{'rows/call':>11}{'prefill tok':>13}{'s':>8}{'ms/step':>9}"]
        for kind, (calls, steps, rows, prefill, seconds) in sorted(by_kind.items()):
            lines.append(
                f"    {kind:<11}{calls:>7}{steps:>7}{rows / calls:>11.1f}{prefill:>13}{seconds:>8.2f}"
                f"{seconds / steps * 1e3:>9.2f}"
            )
        lines.append(f"    step loop busy {busy:.2f} s of {wall:.2f} s wall")
        return "\n".join(lines + profiles)


class StepProfile:
    """What torch.profiler saw over step calls of one kind: kept after the first `skip`, up to `calls`."""

    def __init__(self, calls: int, skip: int = 3):
        self.calls, self.skip = calls, skip
        self.seen, self.wall, self.steps = 0, 0.0, 0
        self.events = []

    @property
    def done(self) -> bool:
        return len(self.events) >= self.calls

    def keep(self, averages, seconds: float, steps: int) -> bool:
        """Counts the call and keeps it when its turn has come; whether it is the first kept."""
        self.seen += 1
        if self.seen <= self.skip or self.done:
            return False
        self.events.append(averages)
        self.wall += seconds
        self.steps += steps
        return len(self.events) == 1

    def report(self) -> str:
        host: dict[str, float] = {}
        kernels: dict[str, float] = {}
        for averages in self.events:
            for e in averages:
                if e.device_type.name == "CPU":
                    host[e.key] = host.get(e.key, 0.0) + e.self_cpu_time_total
                elif e.device_type.name == "CUDA":
                    kernels[e.key] = kernels.get(e.key, 0.0) + e.self_device_time_total

        def top(times: dict[str, float], n: int) -> str:
            return ", ".join(
                f"{name[:60]} {us / 1e3:.1f}" for name, us in sorted(times.items(), key=lambda kv: -kv[1])[:n]
            )

        return (
            f"{len(self.events)} calls, {self.steps} steps: wall {self.wall * 1e3:.1f} ms, GPU kernels "
            f"{sum(kernels.values()) / 1e3:.1f} ms\n    host self time (ms): {top(host, 18)}"
            f"\n    GPU kernels (ms): {top(kernels, 10)}"
        )


async def conversations_loop(loaded, conversations, streams: int) -> list[dict]:
    """Every conversation turn by turn through the in-process engine, `streams` at a time; each turn's timings."""
    timings, queue = [], list(conversations)

    async def stream():
        while queue:
            conversation = queue.pop()
            history = list(conversation.system)
            for turn in conversation.turns:
                history += turn.user
                params = common_pb2.SamplingParams(temperature=0.0, max_tokens=turn.output_len, ignore_eos=True)
                rid, seqs, interval = admit(engine_pb2.GenerateRequest(token_ids=history, sampling_params=params),
                                            loaded.limits)  # fmt: skip
                state = loaded.engine.submit(rid, seqs)
                async for m in stream_responses(loaded.engine, state, interval, rid):
                    history += [t for c in m.choices for t in c.token_ids]
                timings.append(state.timings())

    await asyncio.gather(*[stream() for _ in range(streams)])
    return timings


def describe(timings: list[dict]) -> str:
    parts = []
    for key in ("queue_s", "prefill_s"):
        values = [t[key] for t in timings if key in t]
        parts.append(f"{key[:-2]} ms mean {sum(values) / len(values) * 1e3:.1f} p50 {percentile(values, 50) * 1e3:.1f}")
    return "    per turn: " + ", ".join(parts)


async def measure_multiturn(model, flags: str, args, vocab: int) -> None:
    loaded = build_engine(model, make_parser().parse_args(flags.split()), model_name=args.shape)
    loaded.engine.start(asyncio.get_running_loop())
    try:
        for c in args.streams:
            warm = multi_turn(4, 2, 1000, 64, 8, vocab, False, seed=1)
            await conversations_loop(loaded, warm, min(c, 4))  # graph capture
            trace = StepTrace(loaded.engine, args.profile, args.trace_dir)
            start = time.perf_counter()
            timings = await conversations_loop(loaded, multi_turn(args.multiturn, 4, 1000, 64, 64, vocab, False, 0), c)
            wall = time.perf_counter() - start
            print(f"[{flags}] multi-turn c={c}:\n{trace.report(wall)}\n{describe(timings)}", flush=True)
            trace.detach()
    finally:
        release(loaded)


async def measure(model, flags: str, args, vocab: int) -> None:
    loaded = build_engine(model, make_parser().parse_args(flags.split()), model_name=args.shape)
    loaded.engine.start(asyncio.get_running_loop())
    one = in_process_request(loaded, make_requests(args, max(args.streams) * args.rounds, vocab))
    try:
        for c in args.streams:
            await closed_loop(c, 1, lambda w, r: one(w, r, c, 8, f"warm-up {c}"))  # graph capture
            trace = StepTrace(loaded.engine, args.profile, args.trace_dir)
            start = time.perf_counter()
            rate = await closed_loop(c, args.rounds, lambda w, r: one(w, r, c, salt=f"run {c}"))
            print(f"[{flags}] c={c}: {rate:.0f} tok/s\n{trace.report(time.perf_counter() - start)}", flush=True)
            trace.detach()
    finally:
        release(loaded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shape", default="llama-1b")
    parser.add_argument("--streams", default="256", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--configs", default="--max-model-len 2048")
    parser.add_argument("--profile", type=int, default=0, help="profile this many step calls of each kind (CUDA)")
    parser.add_argument("--trace-dir", help="with --profile: write each kind's first profiled call here (Chrome)")
    parser.add_argument("--multiturn", type=int, default=0, help="this many conversations instead of random prompts")
    args = parser.parse_args()
    for flags in args.configs.split(";"):  # each in a process of its own: the next finds the GPU empty
        in_child(one_config, args, flags)


def one_config(args, flags: str) -> None:
    model = build_model(args.shape, args.device, pick_dtype("auto", torch.device(args.device)))
    run = measure_multiturn if args.multiturn else measure
    asyncio.run(run(model, flags, args, shape_vocab(args.shape)))


if __name__ == "__main__":
    main()
