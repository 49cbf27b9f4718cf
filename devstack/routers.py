"""Start a third-party router (SMG or vllm-router, from their registry wheels) in front of scaleout stacks.

Used by tests/routers and bench/routers: the operator's view, the router given nothing but its documented flags
and the stacks' gateway URLs. Each instance gets its own serving and metrics port (both routers export Prometheus
on 29000 by default, so two at once would collide) and logs to a file, read back without its ANSI colours.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from devstack.lifecycle import Started
from devstack.stack import Stack, free_port

# The router's command and, per kind, the route that lists the workers it routes to.
COMMANDS = {"smg": ["smg", "launch"], "vllm-router": ["vllm-router"]}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class RouterConfig:
    kind: str  # a key of COMMANDS
    policy: str
    worker_urls: list[str]
    args: list[str] = field(default_factory=list)  # more of the router's own documented flags
    # vllm-router's P/D mode (--vllm-pd-disaggregation): the first URL is the prefill worker, the rest decode ones.
    pd: bool = False
    host: str = "127.0.0.1"
    log_path: Path | None = None  # None: a file in a temporary folder
    start_timeout_s: float = 90.0


class Router(Started):
    def __init__(self, config: RouterConfig):
        if config.kind not in COMMANDS:
            raise ValueError(f"unknown router {config.kind!r}; known: {sorted(COMMANDS)}")
        self.config = config
        self.port = free_port(config.host)
        self.metrics_port = free_port(config.host)
        self.log_path = config.log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"{config.kind}-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    @property
    def name(self) -> str:
        return f"{self.config.kind}/{self.config.policy}"

    def argv(self) -> list[str]:
        cfg = self.config
        command = COMMANDS[cfg.kind]
        binary = shutil.which(command[0], path=os.path.dirname(sys.executable)) or shutil.which(command[0])
        if binary is None:
            raise RuntimeError(f"no {command[0]} command; install the dev extras (pip install -e '.[dev]')")
        return [binary, *command[1:], "--host", cfg.host, "--port", str(self.port)] + [
            "--prometheus-host",
            cfg.host,
            "--prometheus-port",
            str(self.metrics_port),
            "--policy",
            cfg.policy,
            *self._workers(),
            *cfg.args,
        ]

    def _workers(self) -> list[str]:
        urls = self.config.worker_urls
        if not self.config.pd:
            return ["--worker-urls", *urls]
        return ["--vllm-pd-disaggregation", "--prefill", urls[0], *(a for url in urls[1:] for a in ("--decode", url))]

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.config.start_timeout_s
        while self.registered() < len(self.config.worker_urls):
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} registered no full fleet in time:\n{self.log_tail()}")
            time.sleep(0.3)

    def registered(self) -> int:
        """How many of the stacks the router lists as its workers (0 while it is not answering)."""
        route = "/workers" if self.config.kind == "smg" else "/list_workers"
        try:
            with urllib.request.urlopen(self.url + route, timeout=2) as answer:
                body = json.loads(answer.read())
        except (OSError, ValueError):
            return 0
        if self.config.kind == "smg":  # workers registered but not yet healthy take no traffic
            return sum(1 for w in body.get("workers", []) if w.get("is_healthy", True))
        return len(body.get("urls", []))

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://{self.config.host}:{self.metrics_port}/metrics", timeout=5) as answer:
            return answer.read().decode()

    def log_text(self) -> str:
        try:
            return _ANSI.sub("", self.log_path.read_text(errors="replace"))
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self, grace_s: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_side_by_side(stacks: list[Stack]) -> None:
    """Start the stacks a router fronts at once (their model loads overlap); the first failure is raised."""
    errors: list[BaseException] = []

    def start(stack: Stack) -> None:
        try:
            stack.start()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=start, args=(s,)) for s in stacks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
