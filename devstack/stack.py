"""Start the whole stack on loopback: service replicas, the one-hop pipeline service and Envoy in front of them.

Used by the `scaleout-stack` launcher and by the integration tests (real processes, real Envoy).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.envoy_config import SERVICES, Cors, Endpoint, Tracing, Upstream, render_config

MODULES = {"render": "render_svc", "engine": "engine_svc", "derender": "derender_svc", "chat": "pipeline_svc"}
_LISTENING = re.compile(r"^LISTENING (\S+) (\S+):(\d+)$")
_METRICS = re.compile(r"^METRICS (\S+) (\S+)$")


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, picked below the kernel's ephemeral range: between this pick and its user binding it,
    a socket bound to port 0 (the replicas' servers) or an outgoing connection could otherwise be handed the
    same number (seen in CI: Envoy exiting on `Address already in use`)."""
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    for _ in range(64):
        port = random.randrange(max(1024, ephemeral_low - 12000), ephemeral_low)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # a crowded range: let the kernel pick
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class Replica:
    name: str
    process: subprocess.Popen
    port: int | None = None
    metrics_url: str | None = None
    listening: threading.Event = field(default_factory=threading.Event)


@dataclass
class StackConfig:
    host: str = "127.0.0.1"
    port: int = 8080  # Envoy: REST and gRPC; 0 picks a free one
    admin_port: int = 0
    model: str | None = None
    replicas: dict[str, int] = field(default_factory=lambda: {"render": 1, "engine": 1, "derender": 1, "chat": 1})
    service_args: dict[str, list[str]] = field(default_factory=dict)  # extra flags per role
    env: dict[str, str] = field(default_factory=dict)
    tracing: Tracing | None = None
    cors: Cors | None = None  # None: no CORS policy (browsers on other origins are refused)
    log_dir: Path | None = None  # None: children log to this terminal
    start_timeout_s: float = 300.0


class Stack:
    def __init__(self, config: StackConfig):
        self.config = config
        self.replicas: list[Replica] = []
        self.envoy: subprocess.Popen | None = None
        self.port = config.port or free_port(config.host)
        self.admin_port = config.admin_port or free_port(config.host)
        self._workdir = Path(tempfile.mkdtemp(prefix="scaleout-"))

    @property
    def gateway(self) -> str:
        return f"{self.config.host}:{self.port}"

    @property
    def rest_url(self) -> str:
        return f"http://{self.gateway}"

    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _log(self, name: str):
        if self.config.log_dir is None:
            return None
        self.config.log_dir.mkdir(parents=True, exist_ok=True)
        return open(self.config.log_dir / f"{name}.log", "ab")

    def _spawn(self, role: str, index: int) -> Replica:
        cfg = self.config
        argv = [sys.executable, "-m", MODULES[role], "--host", cfg.host, "--port", "0"]
        if role == "chat":  # the one-hop service reaches the others through Envoy (balanced, health-checked)
            argv += [
                "--render-target",
                self.gateway,
                "--engine-target",
                self.gateway,
                "--derender-target",
                self.gateway,
            ]
        elif cfg.model:
            argv += ["--model", cfg.model]
        argv += cfg.service_args.get(role, [])
        # Logs meant for a terminal read better as text; log files keep JSON lines (trace ids).
        env = {**os.environ, **({"SCALEOUT_LOG_FORMAT": "text"} if cfg.log_dir is None else {}), **cfg.env}
        name = f"{role}-{index}"
        log = self._log(name)
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, env=env, text=True, bufsize=1)
        replica = Replica(name, process)
        threading.Thread(target=self._follow, args=(replica, log), daemon=True).start()
        return replica

    def _follow(self, replica: Replica, log) -> None:
        """Read a child's stdout: pick up its port and metrics address, pass the rest on."""
        for line in replica.process.stdout:
            if (match := _LISTENING.match(line.strip())) and replica.port is None:
                replica.port = int(match.group(3))
                replica.listening.set()
            elif match := _METRICS.match(line.strip()):
                replica.metrics_url = match.group(2)
            if log is not None:
                log.write(line.encode())
                log.flush()
            else:
                sys.stdout.write(f"[{replica.name}] {line}")

    def start(self) -> None:
        cfg = self.config
        deadline = time.monotonic() + cfg.start_timeout_s
        for role in ("render", "engine", "derender", "chat"):
            self.replicas += [self._spawn(role, i) for i in range(cfg.replicas.get(role, 1))]
        for replica in self.replicas:
            while not replica.listening.wait(0.2):
                self._check_alive(replica, deadline)
        upstreams = [
            Upstream(role, [Endpoint(cfg.host, r.port) for r in self.replicas if r.name.startswith(role + "-")])
            for role in SERVICES
        ]
        config_path = self._workdir / "envoy.yaml"
        tracing = cfg.tracing or Tracing.from_env({**os.environ, **cfg.env})  # the services' own OTEL_* settings
        config_path.write_text(render_config(upstreams, self.port, self.admin_port, cfg.host, tracing, cors=cfg.cors))
        envoy = shutil.which("envoy", path=os.path.dirname(sys.executable)) or shutil.which("envoy")
        log = self._log("envoy")
        self.envoy = subprocess.Popen(
            [envoy, "-c", str(config_path), "--disable-hot-restart", "-l", "warning"],
            stdout=log or subprocess.DEVNULL,
            stderr=log or None,
        )
        for replica in self.replicas:
            self._wait_serving(replica, deadline)
        self._wait_gateway_healthy(deadline)

    def _check_alive(self, replica: Replica, deadline: float) -> None:
        if replica.process.poll() is not None:
            raise RuntimeError(f"{replica.name} exited with {replica.process.returncode} during start-up")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{replica.name} did not start in {self.config.start_timeout_s:.0f}s")

    def _wait_serving(self, replica: Replica, deadline: float) -> None:
        with grpc.insecure_channel(f"{self.config.host}:{replica.port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                try:
                    if (
                        stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status
                        == health_pb2.HealthCheckResponse.SERVING
                    ):
                        return
                except grpc.RpcError:
                    pass
                self._check_alive(replica, deadline)
                time.sleep(0.2)

    def _wait_gateway_healthy(self, deadline: float) -> None:
        """Until Envoy's active health checks see every replica healthy."""
        url = f"http://{self.config.host}:{self.admin_port}/clusters"
        while True:
            try:
                text = urllib.request.urlopen(url, timeout=1).read().decode()
                flags = [
                    line.rsplit("::", 1)[1]
                    for line in text.splitlines()
                    if "::health_flags::" in line and line.split("::", 1)[0].endswith("_service")
                ]
                if len(flags) == len(self.replicas) and all(f == "healthy" for f in flags):
                    # Seen with Envoy 1.40: its workers balance over a newly healthy host only after the
                    # next health-check round (1 s); until then traffic favours the first host found healthy.
                    time.sleep(1.2)
                    return
            except OSError:
                pass
            if self.envoy.poll() is not None:
                raise RuntimeError(f"envoy exited with {self.envoy.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError("gateway did not see every replica healthy in time")
            time.sleep(0.2)

    def describe(self) -> str:
        lines = [
            f"gateway (REST + gRPC): {self.rest_url}",
            f"envoy admin:           http://{self.config.host}:{self.admin_port}",
        ]
        for r in self.replicas:
            metrics = f"  metrics {r.metrics_url}" if r.metrics_url else ""
            lines.append(f"{r.name:<22} {self.config.host}:{r.port}{metrics}")
        return "\n".join(lines)

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM everything (services drain), then kill what is left after the grace period."""
        processes = ([self.envoy] if self.envoy else []) + [r.process for r in self.replicas]
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        end = time.monotonic() + grace_s
        for process in processes:
            try:
                process.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(self._workdir, ignore_errors=True)
