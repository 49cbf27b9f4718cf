"""Chat render side by side with vLLM 0.33's render server, in one run (python -m bench.render.vs_vllm).

Starts our render service as routers call it (a stack of render replicas behind Envoy, which proxies vLLM's render
paths to the replicas' HTTP faces, render_svc/http_face.py: devstack.stack with no other roles) and vLLM's (`vllm launch render`, CPU build, from --vllm, on the same model
and served name), checks that both give the same token ids for every body, then sends the same vLLM-shaped
bodies ({"model", "messages"}) to `POST /v1/chat/completions/render` of each with `hey`, one server after the
other, round by round (so drift on the shared machine hits both alike), at each concurrency:

  short          one user message (37 prompt tokens with SmolLM2's template)
  short turn 2   its second turn (the answer and one more question)
  2k             a system prompt, a ~1,900-token user message, an answer and a question (~2,000 tokens)
  2k turn 2      its second turn

Turn 1 rows run against a stack whose render keeps no prompt piece's token ids (--token-cache-mb 0: every request
is a new conversation, tokenized whole); turn 2 rows against one with the default cache, as the replica that
rendered turn 1 has it (the first request tokenizes the history; the rest find it, and tokenize what is new).

With --direct, the same bodies also go straight to one render replica's HTTP face (no Envoy): what the gateway
costs. With --grpc, our RenderChat is also driven over gRPC on the render replica's own port (h2load: unary gRPC
frames, no Envoy). Per row: requests/s of each, ours / vLLM, and CPU
milliseconds per request of each server's processes and their children (/proc/<pid>/stat: user + system; ours
is the render replicas plus Envoy), with the machine's load average, since `hey` and other work share its
cores. Needs `hey` (apt-get install hey) and, for --grpc, `h2load` (apt-get install nghttp2-client).

    python -m bench.render.vs_vllm [--seconds 5] [--rounds 3] [--concurrency 1,8] [--render-replicas 1] [--direct] [--grpc]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import json_format

from devstack.stack import Stack, StackConfig, free_port
from scaleout.v1 import render_pb2
from scaleout_common.models import model_name, resolve_model

PATH = "/v1/chat/completions/render"
VLLM = Path.home() / ".cache/scaleout/peers/vllm-0.33.0"
PARAGRAPH = "The quick brown fox jumps over the lazy dog while the render service counts every token it sees. "
SHORT = [{"role": "user", "content": "What is the capital of France?"}]
LONG = [
    {"role": "system", "content": "You are a careful summarizer."},
    {"role": "user", "content": PARAGRAPH * 102},
    {"role": "assistant", "content": "Understood. What should I do with it?"},
    {"role": "user", "content": "Summarize it in one sentence."},
]
TURN_2 = [
    {"role": "assistant", "content": "Here is my answer, in one careful sentence about what you asked."},
    {"role": "user", "content": "Thanks. Now say it again, shorter."},
]
WORKLOADS = {"short": SHORT, "short turn 2": SHORT + TURN_2, "2k": LONG, "2k turn 2": LONG + TURN_2}


def tree_cpu(pids: list[int]) -> float:
    """User + system CPU seconds of `pids` and all their live descendants (threads included)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = int(fields[1])
            times[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, list(pids)
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo += [child for child, parent in parents.items() if parent == pid]
    return total


@dataclass
class Target:
    name: str
    url: str  # REST base, or host:port for gRPC
    groups: dict[str, list[int]]  # process groups whose CPU counts: ours "render" and "envoy", vLLM "vllm"
    grpc: bool = False
    done: int = 0  # requests answered 200 over the rounds
    failed: int = 0
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds per group


def hey(url: str, body: Path, concurrency: int, seconds: float) -> tuple[int, int, float]:
    """(200s, other answers, wall seconds) of `hey` posting `body` for `seconds`."""
    command = ["hey", "-z", f"{seconds}s", "-c", str(concurrency), "-m", "POST", "-T", "application/json"]
    started = time.perf_counter()
    out = subprocess.run([*command, "-D", str(body), url + PATH], capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - started
    codes = {int(code): int(n) for code, n in re.findall(r"\[(\d{3})\]\s+(\d+) responses", out)}
    return codes.pop(200, 0), sum(codes.values()), wall


def h2load(target: str, frame: Path, concurrency: int, seconds: float) -> tuple[int, int, float]:
    """The same over gRPC: unary RenderChat frames, `concurrency` connections of one stream each."""
    command = ["h2load", "-c", str(concurrency), "-m", "1", "-D", f"{int(seconds * 1000)}ms", "-d", str(frame)]
    headers = ["-H", "content-type: application/grpc", "-H", "te: trailers"]
    started = time.perf_counter()
    url = f"http://{target}/scaleout.v1.RenderService/RenderChat"
    out = subprocess.run([*command, *headers, url], capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - started
    done = re.search(r"status codes: (\d+) 2xx", out)
    failed = re.search(r"requests: \d+ total, \d+ started, \d+ done, \d+ succeeded, (\d+) failed", out)
    return int(done.group(1)) if done else 0, int(failed.group(1)) if failed else 0, min(wall, seconds)


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url + PATH, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def token_ids(answer: dict) -> list[int]:
    """vLLM's shape (top-level token_ids), or our typed one (generate_request.token_ids)."""
    return answer["token_ids"] if "token_ids" in answer else answer["generate_request"]["token_ids"]


def start_vllm(venv: Path, model: Path, name: str, extra: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [str(venv / "bin/vllm"), "launch", "render", str(model), "--port", str(port)]
    command += ["--served-model-name", name, *extra]
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu"}
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"vLLM's render server exited ({process.returncode}); see {log}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return process, url
        except OSError:
            time.sleep(1)
    raise SystemExit(f"vLLM's render server did not answer /health in 300 s; see {log}")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()


def measure(targets: list[Target], files: dict[str, Path], concurrency: int, args) -> None:
    for target in targets:  # warm up: connections, caches, the servers' first requests
        (h2load if target.grpc else hey)(target.url, files[target.name], concurrency, 1)
    for round_ in range(args.rounds):
        for target in targets if round_ % 2 == 0 else targets[::-1]:
            before = {group: tree_cpu(pids) for group, pids in target.groups.items()}
            drive = h2load if target.grpc else hey
            done, failed, wall = drive(target.url, files[target.name], concurrency, args.seconds)
            for group, pids in target.groups.items():
                target.cpu[group] = target.cpu.get(group, 0.0) + tree_cpu(pids) - before[group]
            target.done, target.failed, target.seconds = (
                target.done + done,
                target.failed + failed,
                target.seconds + wall,
            )


def start_stack(args, folder: Path, cache: bool, logs: Path) -> Stack:
    render_args = shlex.split(args.render_args) + ([] if cache else ["--token-cache-mb", "0"])
    config = StackConfig(
        port=0,
        model=str(folder),
        replicas={"render": args.render_replicas, "engine": 0, "derender": 0, "chat": 0},
        service_args={"render": render_args},
        log_dir=logs,
    )
    return Stack(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="per server, per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--model", default=None, help="model folder (default: the project's default model)")
    parser.add_argument("--vllm", type=Path, default=VLLM, help="the venv vLLM 0.33 is installed in")
    parser.add_argument("--vllm-args", default="", help="more flags for `vllm launch render`")
    parser.add_argument("--render-replicas", type=int, default=1)
    parser.add_argument("--render-args", default="", help="more flags for our render replicas")
    parser.add_argument("--direct", action="store_true", help="also straight to a replica's HTTP face, no Envoy")
    parser.add_argument("--grpc", action="store_true", help="also RenderChat over gRPC, straight to a replica")
    args = parser.parse_args()
    for tool in ["hey"] + (["h2load"] if args.grpc else []):
        if shutil.which(tool) is None:
            raise SystemExit(
                f"{tool} is not installed (apt-get install {'hey' if tool == 'hey' else 'nghttp2-client'})"
            )
    folder = resolve_model(args.model)
    name = model_name(folder)
    print(f"$ python -m bench.render.vs_vllm {shlex.join(sys.argv[1:])}")
    print(f"model {name}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at the start")
    work = Path(tempfile.mkdtemp(prefix="render-vs-vllm-"))
    with ExitStack() as cleanup:
        # Turn 1 is a new conversation every time: its stack keeps no piece's ids. Turn 2's keeps them, as the
        # replica that rendered turn 1 does (the first request renders the history; the rest find it).
        stacks = {
            cache: cleanup.enter_context(start_stack(args, folder, cache, work / f"logs-{cache}"))
            for cache in (False, True)
        }
        vllm, vllm_url = start_vllm(args.vllm, folder, name, shlex.split(args.vllm_args), work / "vllm.log")
        cleanup.callback(stop, vllm)
        print(f"ours: {args.render_replicas} render replica(s) + Envoy; vLLM: {vllm_url}")
        rows = []
        for workload in args.workloads.split(","):
            stack = stacks["turn 2" in workload]
            renders = [r.process.pid for r in stack.replicas if r.name.startswith("render-")]
            assert stack.envoy is not None  # started by the stack
            body = {"model": name, "messages": WORKLOADS[workload]}
            files = {"vllm": work / "body.json", "ours": work / "body.json", "gRPC direct": work / "frame.bin"}
            files["HTTP direct"] = files["vllm"]
            files["vllm"].write_text(json.dumps(body))
            ours, theirs = token_ids(post(stack.rest_url, body)), token_ids(post(vllm_url, body))
            if ours != theirs:
                raise SystemExit(f"{workload}: token ids differ ({len(ours)} ours, {len(theirs)} vLLM's)")
            message = json_format.ParseDict({"messages": body["messages"]}, render_pb2.RenderChatRequest())
            payload = message.SerializeToString()
            files["gRPC direct"].write_bytes(b"\0" + len(payload).to_bytes(4, "big") + payload)
            for concurrency in [int(c) for c in args.concurrency.split(",")]:
                targets = [
                    Target("ours", stack.rest_url, {"render": renders, "envoy": [stack.envoy.pid]}),
                    Target("vllm", vllm_url, {"vllm": [vllm.pid]}),
                ]
                direct = next(r for r in stack.replicas if r.name.startswith("render-"))
                if args.direct:
                    url = f"http://127.0.0.1:{stack.render_http_ports[0]}"
                    targets.append(Target("HTTP direct", url, {"render": [direct.process.pid]}))
                if args.grpc:
                    target = f"127.0.0.1:{direct.bound_port}"
                    targets.append(Target("gRPC direct", target, {"render": [direct.process.pid]}, grpc=True))
                load = os.getloadavg()[0]
                measure(targets, files, concurrency, args)
                rows.append((workload, len(ours), concurrency, load, os.getloadavg()[0], targets))
                report_row(rows[-1])
        print_summary(rows)


def rate(target: Target) -> float:
    return target.done / target.seconds if target.seconds else 0.0


def ms_per(target: Target, group: str | None = None) -> float:
    """CPU milliseconds per answered request, of one group or all of them."""
    cpu = sum(target.cpu.values()) if group is None else target.cpu.get(group, 0.0)
    return 1000 * cpu / target.done if target.done else float("nan")


def report_row(row) -> None:
    workload, tokens, concurrency, load, load_after, targets = row
    ours, vllm = targets[0], targets[1]
    line = (
        f"{workload:<13} {tokens:>5} tok  c={concurrency}: ours {rate(ours):7.1f}/s  vLLM {rate(vllm):7.1f}/s  "
        f"ratio {rate(ours) / rate(vllm):5.2f}x  CPU ms/req ours {ms_per(ours):6.2f} "
        f"(render {ms_per(ours, 'render'):.2f} + envoy {ms_per(ours, 'envoy'):.2f})  vLLM {ms_per(vllm):6.2f}"
    )
    for extra in targets[2:]:
        line += f"  | {extra.name} {rate(extra):7.1f}/s ({rate(extra) / rate(vllm):.2f}x, {ms_per(extra):.2f} ms/req)"
    failed = sum(t.failed for t in targets)
    print(line + f"  load {load:.1f}->{load_after:.1f}" + (f"  FAILED {failed}" if failed else ""), flush=True)


def print_summary(rows) -> None:
    print("targets: >= 1.5x vLLM at c=1, >= 2x at c=8 (short and 2k chats), at no more CPU per request")
    for workload, _, concurrency, _, _, targets in rows:
        ours, vllm = targets[0], targets[1]
        goal = 1.5 if concurrency == 1 else 2.0
        ratio = rate(ours) / rate(vllm)
        cpu_ok = ms_per(ours) <= ms_per(vllm)
        verdict = "met" if ratio >= goal and cpu_ok else "NOT met"
        print(
            f"  {workload:<13} c={concurrency}: {ratio:.2f}x (goal {goal}x), CPU {'<=' if cpu_ok else '>'} vLLM's: {verdict}"
        )


if __name__ == "__main__":
    main()
