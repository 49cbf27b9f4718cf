"""Render the Envoy config (envoy.yaml.j2) for a set of service replicas."""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from scaleout.v1 import chat_pb2, derender_pb2, engine_pb2, render_pb2
from scaleout_common import tracing
from scaleout_common.codegen import DESCRIPTOR_SET, GENERATED

TEMPLATE = Path(__file__).with_name("envoy.yaml.j2")

# role -> the gRPC service it serves; Envoy routes and health-checks by these names.
SERVICES = {
    "render": render_pb2.DESCRIPTOR.services_by_name["RenderService"],
    "engine": engine_pb2.DESCRIPTOR.services_by_name["EngineService"],
    "derender": derender_pb2.DESCRIPTOR.services_by_name["DerenderService"],
    "chat": chat_pb2.DESCRIPTOR.services_by_name["ChatService"],
}


@dataclass
class Endpoint:
    host: str
    port: int


@dataclass
class Upstream:
    role: str
    endpoints: list[Endpoint] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return SERVICES[self.role].full_name

    @property
    def discovery(self) -> str:
        """STATIC for IP addresses (loopback stacks), STRICT_DNS for names (Kubernetes headless Services)."""
        return "STATIC" if all(_is_ip(e.host) for e in self.endpoints) else "STRICT_DNS"

    @property
    def cluster(self) -> str:
        return f"{self.role}_service"

    @property
    def streaming_methods(self) -> list[str]:
        """Methods that stream (either way): their routes get no timeout."""
        return [m.name for m in SERVICES[self.role].methods if m.server_streaming or m.client_streaming]


@dataclass
class Tracing:
    """Envoy's OpenTelemetry tracer: where its spans go (OTLP over gRPC, or HTTP to `path`)."""

    host: str
    port: int
    service_name: str = "scaleout-gateway"
    protocol: str = tracing.GRPC
    path: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Tracing | None:
        """From the same OTEL_* variables the services read; None when they leave tracing off."""
        if not tracing.tracing_enabled(env):
            return None
        protocol, host, port, path = tracing.otlp_traces_endpoint(env)
        return cls(host, port, protocol=protocol, path=path)


def render_config(
    upstreams: list[Upstream],
    port: int,
    admin_port: int,
    host: str = "127.0.0.1",
    tracing: Tracing | None = None,
    unary_timeout_s: int = 300,
    health_interval_s: float = 1.0,
    descriptor_set: str = str(GENERATED / DESCRIPTOR_SET),
) -> str:
    template = jinja2.Template(
        TEMPLATE.read_text(), trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined
    )
    return template.render(
        host=host,
        port=port,
        admin_port=admin_port,
        services=upstreams,
        descriptor_set=descriptor_set,
        tracing=tracing,
        unary_timeout_s=unary_timeout_s,
        health_interval_s=health_interval_s,
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def main() -> None:
    """Print an Envoy config for replicas elsewhere, e.g. Kubernetes Services (see deploy/)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--admin-port", type=int, default=9901)
    parser.add_argument("--descriptor-set", default=str(GENERATED / DESCRIPTOR_SET))
    parser.add_argument(
        "--upstream",
        action="append",
        required=True,
        metavar="ROLE=HOST:PORT",
        help="a replica (or DNS name) per role; repeat for several",
    )
    args = parser.parse_args()
    upstreams = {role: Upstream(role) for role in SERVICES}
    for spec in args.upstream:
        role, address = spec.split("=", 1)
        host, port = address.rsplit(":", 1)
        upstreams[role].endpoints.append(Endpoint(host, int(port)))
    print(
        render_config(
            list(upstreams.values()),
            args.port,
            args.admin_port,
            args.host,
            tracing=Tracing.from_env(os.environ),
            descriptor_set=args.descriptor_set,
        ),
        end="",
    )


if __name__ == "__main__":
    main()
