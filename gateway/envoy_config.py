"""Render the Envoy config (envoy.yaml.j2) for a set of service replicas."""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import jinja2

from gateway.edge import Edge
from gateway.json_fields import FIELD_HEADER, guard_lua
from gateway.limits import REPLY_MAPPERS, Limits
from gateway.rest_routes import HTTP_FACES, rest_routes
from scaleout.v1 import (
    anthropic_pb2,
    chat_pb2,
    derender_pb2,
    engine_pb2,
    engine_stream_pb2,
    fleet_metrics_pb2,
    fleet_pb2,
    openai_pb2,
    render_pb2,
    responses_pb2,
    sglang_rl_pb2,
    sglang_server_pb2,
    vllm_server_pb2,
)
from scaleout_common import health, openai_errors, prefix_hash
from scaleout_common.codegen import DESCRIPTOR_SET, GENERATED, OPENAPI
from scaleout_common.errors import untyped_reason
from scaleout_common.identity import ABORTED_HEADER
from scaleout_common.reasons import Reason
from scaleout_common.telemetry import tracing
from scaleout_common.version import VERSION

TEMPLATE = Path(__file__).with_name("envoy.yaml.j2")
OPENAI_ERRORS_LUA = Path(__file__).with_name("openai_errors.lua")

# role -> the gRPC services it serves (the first is the one health checks ask about); Envoy routes by them.
SERVICES = {
    "render": (render_pb2.DESCRIPTOR.services_by_name["RenderService"],),
    "engine": (engine_pb2.DESCRIPTOR.services_by_name["EngineService"],),
    "derender": (derender_pb2.DESCRIPTOR.services_by_name["DerenderService"],),
    "chat": (
        chat_pb2.DESCRIPTOR.services_by_name["ChatService"],
        openai_pb2.DESCRIPTOR.services_by_name["OpenAIService"],
        anthropic_pb2.DESCRIPTOR.services_by_name["AnthropicService"],
        responses_pb2.DESCRIPTOR.services_by_name["ResponsesService"],
        # The engine's stream for REST clients (`/inference/v1/generate/stream`), relayed so that it ends in-band
        # when its engine replica dies; native gRPC calls of EngineService.Generate go to the engine itself.
        engine_stream_pb2.DESCRIPTOR.services_by_name["EngineStreamService"],
        # Every engine replica's vllm: series in one exposition, the gateway's `GET /metrics`.
        fleet_metrics_pb2.DESCRIPTOR.services_by_name["FleetMetricsService"],
        # Every engine replica at once (the one-hop service calls each directly), and the router faces on the
        # routers' own paths (pipeline_svc/faces/).
        fleet_pb2.DESCRIPTOR.services_by_name["FleetService"],
        sglang_server_pb2.DESCRIPTOR.services_by_name["SGLangServerService"],
        sglang_rl_pb2.DESCRIPTOR.services_by_name["SGLangRlService"],
        vllm_server_pb2.DESCRIPTOR.services_by_name["VllmServerService"],
    ),
}

# The readiness probes of load balancers and routers (vLLM's `GET /health`, and `/ping` as GET or POST), answered
# by Envoy itself from its own active health checks: 200 while every role's cluster has a healthy replica, 503 when
# one has none (Envoy's health_check filter; it reads the percentage as a whole number, so 1 is "at least one
# healthy replica" for clusters of up to 100). No key is needed: they come before the API-key filter.
PROBES = ({"name": "health", "methods": "GET|HEAD"}, {"name": "ping", "methods": "GET|HEAD|POST"})
PROBE_MIN_HEALTHY_PERCENT = 1
# vLLM's `GET /version`, answered by Envoy (no key needed: gateway/edge.py).
VERSION_BODY = json.dumps({"version": VERSION})

# gRPC services the gateway answers itself for grpcurl and health probes: all go to the one-hop service, whose
# reflection (v1 and v1alpha, scaleout_common/reflection.py) lists the whole contract (pipeline_svc: reflected_names)
# and which answers a health check naming another role's service by asking that role (pipeline_svc/role_health.py:
# its call carries health.ROLE_HEADER, on which the gateway routes it to the role's replicas).
GATEWAY_GRPC = (
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.health.v1.Health",
)
GATEWAY_GRPC_ROLE = "chat"
# The gateway's own refusals are GATEWAY_ + Envoy's response flags.
GATEWAY_REASON_PREFIX = Reason.GATEWAY_ERROR.value.removesuffix("ERROR")
# A call that came in as gRPC (the local replies' filters): the transcoder gives a REST call gRPC's content-type
# and keeps the path it came with in x-envoy-original-path.
NATIVE_GRPC = [
    {"header_filter": {"header": {"name": "content-type", "string_match": {"prefix": "application/grpc"}}}},
    {"header_filter": {"header": {"name": "x-envoy-original-path", "present_match": False}}},
]
# Envoy caps direct_response bodies at 4 KB by default; the OpenAPI document is ~100 KB.
OPENAPI_MAX_BYTES = 4 * 1024 * 1024


@dataclass
class Cors:
    """Envoy's CORS policy for browser clients; the gateway has none unless origins are given ("*": any)."""

    origins: list[str]
    max_age_s: int = 86400

    @classmethod
    def from_list(cls, origins: str) -> Cors | None:
        """From "https://a.example,http://localhost:5173" (or "*"); None when empty."""
        allowed = [origin.strip() for origin in origins.split(",") if origin.strip()]
        return cls(allowed) if allowed else None

    @property
    def origin_matchers(self) -> list[dict]:
        return [{"safe_regex": {"regex": ".*"}} if o == "*" else {"exact": o} for o in self.origins]


@dataclass(frozen=True)
class PrefixRouting:
    """Cache-aware routing of one role's cluster: a consistent hash (MAGLEV or RING_HASH) on a request header,
    render's prefix hash (render_svc/routing.py), with bounded load (`hash_balance_factor` percent of the
    average; 0: unbounded). Requests without the header go to a random replica."""

    role: str = "engine"
    header: str = prefix_hash.ROUTING_HEADER
    policy: str = "MAGLEV"
    hash_balance_factor: int = 150

    @classmethod
    def add_arguments(cls, parser) -> None:
        parser.add_argument(
            "--engine-lb",
            default="maglev",
            choices=["maglev", "ring_hash", "round_robin"],
            help="engine replicas: consistent hash on the x-scaleout-prefix-hash header (maglev, ring_hash) "
            "so a conversation stays where its KV cache is, or round_robin",
        )
        parser.add_argument(
            "--hash-balance-factor",
            type=int,
            default=cls.hash_balance_factor,
            help="bounded load for the consistent hash: a replica takes at most this percent of the average "
            "requests in flight before the overflow moves on (0: unbounded)",
        )

    @classmethod
    def from_args(cls, args) -> PrefixRouting | None:
        if args.engine_lb == "round_robin":
            return None
        return cls(policy=args.engine_lb.upper(), hash_balance_factor=args.hash_balance_factor)


@dataclass
class Endpoint:
    host: str
    port: int
    http_port: int = 0  # the replica's plain-HTTP face (render's --http-port), 0: none


@dataclass
class Upstream:
    role: str
    endpoints: list[Endpoint] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        """The service health checks ask about."""
        return SERVICES[self.role][0].full_name

    @property
    def full_names(self) -> list[str]:
        return [service.full_name for service in SERVICES[self.role]]

    @property
    def discovery(self) -> str:
        """STATIC for IP addresses (loopback stacks), STRICT_DNS for names (Kubernetes headless Services)."""
        return "STATIC" if all(_is_ip(e.host) for e in self.endpoints) else "STRICT_DNS"

    @property
    def cluster(self) -> str:
        return f"{self.role}_service"

    @property
    def http_cluster(self) -> str | None:
        """The cluster of the replicas' HTTP faces (rest_routes.HTTP_FACES), when every replica has one."""
        has = self.role in HTTP_FACES and self.endpoints and all(e.http_port for e in self.endpoints)
        return f"{self.role}_http" if has else None

    @property
    def streaming_methods(self) -> list[str]:
        """Methods that stream (either way): their routes get no timeout."""
        return [
            f"{s.full_name}/{m.name}"
            for s in SERVICES[self.role]
            for m in s.methods
            if m.server_streaming or m.client_streaming
        ]


@dataclass(frozen=True)
class Listener:
    """One of Envoy's listeners: the clients' (`gateway`) or the one-hop service's hops (`internal`)."""

    name: str
    port: int
    socket: dict | None  # its transport socket (TLS), or None for plaintext
    rate_limited: bool  # charges the per-key rate limit: a client's call is charged at the door, not at each hop


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
    cors: Cors | None = None,
    limits: Limits | None = None,
    admin_host: str = "127.0.0.1",
    edge: Edge | None = None,
    prefix_routing: PrefixRouting | None = PrefixRouting(),  # frozen: safe to share
    internal_port: int = 0,
) -> str:
    """The Envoy config; GET /openapi.json serves the document codegen writes beside `descriptor_set`.

    The admin interface (which can stop Envoy) listens on `admin_host`: loopback unless asked otherwise.
    `prefix_routing` balances the engine replicas on render's prefix hash (None: round robin).
    `internal_port` (0: none) is a second listener for the one-hop service's hops, which the per-key rate limit
    does not charge again (the client's call was charged once when it came in).
    """
    template = jinja2.Template(
        TEMPLATE.read_text(), trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined
    )
    edge = edge or Edge()
    limits = limits or Limits()
    listeners = [Listener("gateway", port, edge.downstream_socket(), rate_limited=True)]
    if internal_port:
        listeners.append(Listener("internal", internal_port, edge.internal_socket(), rate_limited=False))
    return template.render(
        host=host,
        listeners=listeners,
        admin_host=admin_host,
        admin_port=admin_port,
        limits=limits,
        rest_routes=rest_routes(((u.role, SERVICES[u.role], u.http_cluster) for u in upstreams), limits),
        reply_mappers=REPLY_MAPPERS,
        gateway_mapper={"filter": {"response_flag_filter": {}}, "reason": f"{GATEWAY_REASON_PREFIX}%RESPONSE_FLAGS%"},
        native_grpc=NATIVE_GRPC,
        edge=edge,
        abort=_abort_route(upstreams),
        services=upstreams,
        json_fields_lua=guard_lua(service for u in upstreams for service in SERVICES[u.role]),
        unknown_field_header=FIELD_HEADER,
        unsupported_field_reason=Reason.UNSUPPORTED_FIELD.value,
        descriptor_set=descriptor_set,
        openapi=str(Path(descriptor_set).with_name(OPENAPI)),
        openai_errors_lua=OPENAI_ERRORS_LUA.read_text()
        .replace("{{ error_types }}", openai_errors.lua_table())
        .replace(
            "{{ untyped_reasons }}", openai_errors.lua_table({c.value[0]: untyped_reason(c) for c in grpc.StatusCode})
        )
        .replace("{{ untyped_reason }}", untyped_reason(grpc.StatusCode.UNKNOWN))
        .replace("{{ anthropic_error_types }}", openai_errors.lua_table(openai_errors.ANTHROPIC_TYPES))
        .replace("{{ anthropic_error_codes }}", openai_errors.lua_table(openai_errors.ANTHROPIC_ERROR_CODES))
        .replace("{{ anthropic_prefix }}", openai_errors.ANTHROPIC_PATH_PREFIX)
        .replace(
            "{{ sglang_outcome_paths }}",
            openai_errors.lua_table(dict.fromkeys(openai_errors.SGLANG_OUTCOME_PATHS, True)),
        )
        .replace("{{ vllm_paths }}", openai_errors.lua_table(dict.fromkeys(openai_errors.VLLM_PATHS, True)))
        .replace("{{ vllm_error_types }}", openai_errors.lua_table(openai_errors.VLLM_TYPES)),
        gateway_reason_prefix=GATEWAY_REASON_PREFIX,
        invalid_json_reason=Reason.INVALID_JSON.value,
        invalid_http_reason=Reason.INVALID_HTTP.value,
        openapi_max_bytes=OPENAPI_MAX_BYTES,
        gateway_grpc=GATEWAY_GRPC,
        gateway_grpc_cluster=Upstream(GATEWAY_GRPC_ROLE).cluster,
        gateway_grpc_role=GATEWAY_GRPC_ROLE,
        health_role_header=health.ROLE_HEADER,
        cors=cors,
        tracing=tracing,
        unary_timeout_s=unary_timeout_s,
        health_interval_s=health_interval_s,
        prefix_routing=prefix_routing,
        probes=PROBES,
        probe_clusters={u.cluster: {"value": PROBE_MIN_HEALTHY_PERCENT} for u in upstreams},
        version_body=VERSION_BODY,
    )


def _abort_route(upstreams: list[Upstream]) -> dict | None:
    """Abort is retried over the engine replicas until one owns the request (see the template)."""
    engine = next((u for u in upstreams if u.role == "engine" and u.endpoints), None)
    if engine is None:
        return None
    # A DNS name may stand for any number of replicas: try up to 8.
    replicas = len(engine.endpoints) if engine.discovery == "STATIC" else 8
    return {
        "method": f"{engine.full_name}/Abort",
        "cluster": engine.cluster,
        "header": ABORTED_HEADER,
        "retries": max(replicas - 1, 0),
    }


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
    parser.add_argument(
        "--internal-port",
        type=int,
        default=0,
        help="a listener for the one-hop service's hops: no per-key rate limit; behind TLS, it requires a client "
        "certificate from the hops' CA (--mtls-dir). 0: none (the hops then pay the rate limit at every hop)",
    )
    parser.add_argument("--admin-host", default="127.0.0.1", help="Envoy admin address (it can stop Envoy)")
    parser.add_argument("--descriptor-set", default=str(GENERATED / DESCRIPTOR_SET))
    parser.add_argument("--cors-origins", default="", help="comma-separated origins browsers may call from; * for any")
    Limits.add_arguments(parser)
    Edge.add_arguments(parser)
    PrefixRouting.add_arguments(parser)
    parser.add_argument(
        "--upstream",
        action="append",
        required=True,
        metavar="ROLE=HOST:PORT[:HTTP_PORT]",
        help="a replica (or DNS name) per role; repeat for several. HTTP_PORT: render's --http-port, where the "
        "gateway proxies vLLM's render routes untranscoded (every render replica must have one)",
    )
    args = parser.parse_args()
    upstreams = {role: Upstream(role) for role in SERVICES}
    for spec in args.upstream:
        role, address = spec.split("=", 1)
        host, port, *http_port = address.split(":")
        upstreams[role].endpoints.append(Endpoint(host, int(port), int(http_port[0]) if http_port else 0))
    print(
        render_config(
            list(upstreams.values()),
            args.port,
            args.admin_port,
            args.host,
            tracing=Tracing.from_env(os.environ),
            descriptor_set=args.descriptor_set,
            cors=Cors.from_list(args.cors_origins),
            limits=Limits.from_args(args),
            admin_host=args.admin_host,
            edge=Edge.from_args(args),
            prefix_routing=PrefixRouting.from_args(args),
            internal_port=args.internal_port,
        ),
        end="",
    )


if __name__ == "__main__":
    main()
