"""NVIDIA Dynamo's frontend, and one of our Dynamo workers per engine (docs/dynamo.md), beside engines that serve.

`scaleout-stack --dynamo-port PORT` starts it beside the stack's engine replicas (`beside`); the slow Dynamo test
(tests/routers/test_dynamo.py) beside engines of its own. One machine, no etcd or NATS: Dynamo's file discovery in
a folder of this run's own, its TCP request plane and ZMQ event plane. The frontend routes with `--router-mode kv`
by default, on the KV events each worker relays from its engine (engines with --kv-events). Each worker's Dynamo
system server (its `dynamo_component_*` series) listens on a port of its own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from devstack.lifecycle import Started
from devstack.stack import Stack, free_port, stop_processes

PLANE = ["--discovery-backend", "file", "--request-plane", "tcp", "--event-plane", "zmq"]
CLIENT = "dynamo"  # the admin identity workers call a secure stack's engines as (hop.py's --client)


@dataclass
class DynamoConfig:
    engines: list[str]  # the engines' gRPC addresses (host:port), one worker each
    http_port: int = 0  # the frontend's OpenAI port; 0 picks a free one
    host: str = "127.0.0.1"
    model: str | None = None  # the engines' model folder (None: the default model)
    router_mode: str = "kv"  # the frontend's --router-mode
    tls_dirs: list[Path] | None = None  # mTLS to the engines: one hop certificate folder per worker
    client: str | None = None  # with tls_dirs: the admin identity the workers call their engines as
    env: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None  # None: this terminal
    start_timeout_s: float = 180.0


class Dynamo(Started):
    def __init__(self, config: DynamoConfig):
        self.config = config
        self.http_port = config.http_port or free_port(config.host)
        self.system_ports = [free_port(config.host) for _ in config.engines]
        self.processes: dict[str, subprocess.Popen] = {}
        self._workdir = Path(tempfile.mkdtemp(prefix="scaleout-dynamo-"))
        self._logs: list = []

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.http_port}/v1"

    @property
    def metrics_urls(self) -> list[str]:
        return [f"http://{self.config.host}:{port}/metrics" for port in self.system_ports]

    def start(self) -> None:
        if importlib.util.find_spec("dynamo") is None:
            raise RuntimeError("Dynamo's frontend needs ai-dynamo (make setup installs it; docs/dynamo.md)")
        cfg = self.config
        env = {**os.environ, "DYN_FILE_KV": str(self._workdir / "discovery"), **cfg.env}
        for number, engine in enumerate(cfg.engines):
            argv = [sys.executable, "-m", "engine_svc.faces.dynamo", "--engine", engine, *PLANE]
            argv += ["--model", cfg.model] if cfg.model else []
            if cfg.tls_dirs:
                argv += ["--tls-dir", str(cfg.tls_dirs[number])] + (["--client", cfg.client] if cfg.client else [])
            self._spawn(f"dynamo-worker-{number}", argv, {**env, "DYN_SYSTEM_PORT": str(self.system_ports[number])})
        frontend = [sys.executable, "-m", "dynamo.frontend", *PLANE, "--http-host", cfg.host]
        frontend += ["--http-port", str(self.http_port), "--router-mode", cfg.router_mode]
        self._spawn("dynamo-frontend", frontend, env)
        deadline = time.monotonic() + cfg.start_timeout_s
        while not self.ready():
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {process.returncode} during start-up")
            if time.monotonic() > deadline:
                raise TimeoutError(f"Dynamo's frontend and workers did not come up in {cfg.start_timeout_s:.0f}s")
            time.sleep(0.5)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = None
        if self.config.log_dir is not None:
            self.config.log_dir.mkdir(parents=True, exist_ok=True)
            log = open(self.config.log_dir / f"{name}.log", "ab")  # noqa: SIM115 (closed in stop())
            self._logs.append(log)
        self.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT if log else None, env=env)

    def ready(self) -> bool:
        """Every worker registered in the discovery folder and the frontend listing the model."""
        instances = self._workdir / "discovery" / "v1" / "instances"
        workers = [p for p in instances.glob("*") if "%2Fgenerate%2F" in p.name] if instances.exists() else []
        if len(workers) < len(self.config.engines):
            return False
        try:
            with urllib.request.urlopen(self.url + "/models", timeout=2) as answer:
                return bool(json.loads(answer.read()).get("data"))
        except (OSError, ValueError):
            return False

    def describe(self) -> str:
        lines = [f"dynamo frontend:       {self.url}  (OpenAI; Dynamo's {self.config.router_mode} router)"]
        for number, (engine, metrics) in enumerate(zip(self.config.engines, self.metrics_urls, strict=True)):
            lines.append(f"dynamo-worker-{number:<8} engine {engine}  metrics {metrics}")
        return "\n".join(lines)

    def stop(self, grace_s: float = 10.0) -> None:
        stop_processes(list(self.processes.values()), grace_s)
        for log in self._logs:
            log.close()
        shutil.rmtree(self._workdir, ignore_errors=True)


def beside(stack: Stack, http_port: int) -> Dynamo:
    """Dynamo in front of a started stack's engine replicas. With a secure stack each worker gets a hop certificate
    from the stack's CA and calls its engine as the admin identity CLIENT, as the stack's own hops do."""
    cfg = stack.config
    engines = [r for r in stack.replicas if r.name.startswith("engine-")]
    tls_dirs = None
    if stack.authority is not None:
        tls_dirs = [stack.authority.issue(f"dynamo-worker-{i}") for i in range(len(engines))]
    return Dynamo(
        DynamoConfig(
            engines=[f"{cfg.host}:{r.bound_port}" for r in engines],
            http_port=http_port,
            host=cfg.host,
            model=cfg.model,
            tls_dirs=tls_dirs,
            client=CLIENT if tls_dirs else None,
            log_dir=cfg.log_dir,
        )
    )
