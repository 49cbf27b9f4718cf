"""The gateway under each attack of issue 36, beside a bystander (python -m bench.security --only isolation).

One stack (the gateway's heap limit `--heap-mb`), then each named configuration for `--window-s` seconds:
  baseline        no attack
  long-fields     the long-field requests of devstack.attacks, sent in a loop
  stalled-http1   uploads stalled at 1.25x the heap limit over HTTP/1.1, renewed as the gateway lets them go
  stalled-http2   the same over HTTP/2
  silent-sockets  `--sockets` connections that never send a byte, renewed as the gateway closes them
Bystander: `--bystanders` clients, each POST /tokenize in a loop on a new connection every time (a lockout shows);
its latency p50 / p99 and its failures. Gateway: Envoy's resident memory and its heap (server.memory_allocated,
what the overload manager watches), at peak during the window.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import requests

from devstack.attacks import SilentSockets, StalledBodies, long_fields, raise_open_files
from devstack.stack import Stack, StackConfig
from gateway.limits import Limits

STALLED_MB = 24
CONFIGURATIONS = ("baseline", "long-fields", "stalled-http1", "stalled-http2", "silent-sockets")


class _Attack:
    """Runs `step` every 0.5 s until stopped; `step` tops the attack up and returns what it holds."""

    def __init__(self, step: Callable[[], list]) -> None:
        self._step, self._stop, self._held = step, threading.Event(), []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self._held = self._step()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        for attack in self._held:
            attack.close()


def _attack(name: str, stack: Stack, args) -> _Attack | None:
    host, port = stack.config.host, stack.port
    if name == "baseline":
        return None
    if name == "long-fields":
        bodies = long_fields()

        def send():
            for path, body in bodies:
                requests.post(stack.rest_url + path, data=body, headers={"content-type": "application/json"})
            return []

        return _Attack(send)
    held: list = []
    if name.startswith("stalled-"):
        count = args.heap_mb * 5 // 4 // STALLED_MB

        def top_up():
            missing = count - sum(a.prune() for a in held)
            if missing > 0:
                path, http2 = "/v1/chat/completions/render", name.endswith("http2")
                held.append(StalledBodies(host, port, path, missing, STALLED_MB, http2=http2))
            return held

        return _Attack(top_up)

    def open_more():
        missing = args.sockets - sum(a.prune() for a in held)
        if missing > 0:
            held.append(SilentSockets(host, port, missing))
        return held

    return _Attack(open_more)


def _bystander(stack: Stack, until: float, samples: list, failures: list) -> None:
    while time.monotonic() < until:
        started = time.perf_counter()
        try:
            answer = requests.post(stack.rest_url + "/tokenize", json={"prompt": "a bystander"}, timeout=10)
            if answer.status_code == 200:
                samples.append(time.perf_counter() - started)
            else:
                failures.append(answer.status_code)
        except requests.RequestException as error:
            failures.append(type(error).__name__)
        time.sleep(0.05)


def _heap_bytes(stack: Stack) -> int:
    url = f"http://{stack.config.host}:{stack.admin_port}/stats?filter=^server.memory_allocated$"
    return int(urllib.request.urlopen(url, timeout=5).read().decode().split(": ")[1])


def _rss_mib(pid: int) -> float:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmRSS"))
    return int(line.split()[1]) / 1024


def _window(stack: Stack, name: str, args) -> dict:
    assert stack.envoy is not None
    attack = _attack(name, stack, args)
    time.sleep(1.0)  # the attack is on before the bystander starts
    samples: list[float] = []
    failures: list = []
    until = time.monotonic() + args.window_s
    clients = [
        threading.Thread(target=_bystander, args=(stack, until, samples, failures)) for _ in range(args.bystanders)
    ]
    for client in clients:
        client.start()
    rss, heap = 0.0, 0
    while any(c.is_alive() for c in clients):
        rss, heap = max(rss, _rss_mib(stack.envoy.pid)), max(heap, _heap_bytes(stack))
        time.sleep(0.25)
    if attack is not None:
        attack.stop()
    ordered = sorted(samples) or [float("nan")]
    return {
        "bystander_requests": len(samples) + len(failures),
        "bystander_failures": len(failures),
        "failure_kinds": sorted({str(f) for f in failures}),
        "bystander_p50_ms": round(1000 * statistics.median(ordered), 1),
        "bystander_p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1),
        "gateway_rss_peak_mib": round(rss, 1),
        "gateway_heap_peak_mib": round(heap / 2**20, 1),
    }


def isolation(args) -> dict:
    raise_open_files(args.sockets + 4_000)
    limits = Limits(max_heap_mb=args.heap_mb)
    config = StackConfig(port=0, limits=limits, log_dir=Path(args.log_dir) / "isolation")
    out: dict = {"heap_limit_mib": args.heap_mb, "window_s": args.window_s, "configurations": {}}
    with Stack(config) as stack:
        _window(stack, "baseline", args)  # warm-up
        for name in args.attack or CONFIGURATIONS:
            out["configurations"][name] = result = _window(stack, name, args)
            print(f"isolation {name:<15} {json.dumps(result)}", flush=True)
            time.sleep(limits.connect_timeout_s + 2)  # what the attack left is let go
    return out


def add_arguments(parser) -> None:
    parser.add_argument("--attack", action="append", choices=CONFIGURATIONS, help="isolation: only these (repeat)")
    parser.add_argument("--window-s", type=float, default=20.0, help="isolation: seconds each configuration runs")
    parser.add_argument("--bystanders", type=int, default=2, help="isolation: clients measured beside the attack")
    parser.add_argument("--heap-mb", type=int, default=256, help="isolation: the gateway's heap limit")
    parser.add_argument("--sockets", type=int, default=10_000, help="isolation: silent sockets held")
