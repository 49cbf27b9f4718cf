"""The edge's bounds of issue 36 are in the config Envoy gets, and Envoy takes it (`envoy --mode validate`): a time
limit on receiving a request, idle streams and connections cut first as the heap fills, silent sockets closed,
body limits per REST route (405 for a method a path does not take), HTTP/2 through oghttp2, upstream header
limits that reset a stream rather than a connection, and the header limit clients get."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from devstack.certs import Authority
from gateway.edge import Edge, Mtls, Tls
from gateway.envoy_config import SERVICES, Endpoint, Upstream, render_config
from gateway.limits import Limits

UPSTREAMS = [Upstream(role, [Endpoint("127.0.0.1", 50051 + i)]) for i, role in enumerate(SERVICES)]


def _config(**kwargs) -> dict:
    return yaml.safe_load(render_config(UPSTREAMS, 8080, 9901, **kwargs))


def _manager(listener: dict) -> dict:
    return listener["filter_chains"][0]["filters"][0]["typed_config"]


def test_time_bounds_cover_the_body_and_spare_the_generations():
    limits = Limits()
    manager = _manager(_config()["static_resources"]["listeners"][0])
    assert manager["request_timeout"] == f"{limits.request_timeout_s}s"
    assert manager["stream_idle_timeout"] == f"{limits.stream_idle_timeout_s}s"
    assert manager["common_http_protocol_options"]["idle_timeout"] == f"{limits.connection_idle_timeout_s}s"
    routes = manager["route_config"]["virtual_hosts"][0]["routes"]
    silent = [f"/{s.full_name}/" for s in SERVICES["chat"] + SERVICES["engine"]]  # generating: no byte for long
    for route in routes:
        path = route["match"].get("path") or route["match"].get("prefix", "")
        if path.startswith(tuple(silent)) and not path.endswith("/Abort"):
            assert route["route"]["idle_timeout"] == "0s", path


def test_idle_holders_go_first_as_the_heap_fills():
    actions = {a["name"]: a for a in _config()["overload_manager"]["actions"]}
    reduce = actions["envoy.overload_actions.reduce_timeouts"]
    scaled = reduce["triggers"][0]["scaled"]
    refuse = actions["envoy.overload_actions.stop_accepting_requests"]["triggers"][0]["threshold"]["value"]
    assert scaled["saturation_threshold"] < refuse, "idle streams are cut before anyone is refused"
    timers = {t["timer"] for t in reduce["typed_config"]["timer_scale_factors"]}
    assert {"HTTP_DOWNSTREAM_STREAM_IDLE", "HTTP_DOWNSTREAM_CONNECTION_IDLE"} <= timers


def test_silent_sockets_are_closed_on_every_listener(tmp_path):
    for edge in (Edge(), _secure_edge(tmp_path)):
        for listener in _config(edge=edge, internal_port=8090)["static_resources"]["listeners"]:
            assert listener["listener_filters_timeout"] == f"{Limits().connect_timeout_s}s"
            inspector = listener["listener_filters"][0]["name"]
            chain = listener["filter_chains"][0]
            if "transport_socket" in chain:
                assert inspector == "envoy.filters.listener.tls_inspector"
                assert chain["transport_socket_connect_timeout"] == f"{Limits().connect_timeout_s}s"
            else:
                assert inspector == "envoy.filters.listener.http_inspector"


def test_body_limits_per_rest_route_and_405_for_other_methods():
    limits = Limits()
    routes = _manager(_config()["static_resources"]["listeners"][0])["route_config"]["virtual_hosts"][0]["routes"]
    rest = {
        r["match"].get("path") or r["match"]["path_match_policy"]["typed_config"]["path_template"]: r
        for r in routes
        if r.get("direct_response", {}).get("status") == 405
    }
    body = {
        path: r["typed_per_filter_config"]["envoy.filters.http.buffer"]["buffer"]["max_request_bytes"]
        for path, r in rest.items()
    }
    assert body["/v1/chat/completions"] == body["/v1/messages"] == limits.max_one_hop_body_mb << 20
    assert body["/v1/chat/completions/render_batch"] == body["/tokenize"] == limits.max_body_bytes
    assert limits.max_one_hop_body_mb * 8 <= limits.max_body_mb
    allow = {path: r["response_headers_to_add"][0]["header"]["value"] for path, r in rest.items()}
    assert allow["/v1/chat/completions"] == "POST" and allow["/v1/models/{model=**}"] == "GET"


def test_one_bad_answer_resets_a_stream_not_the_connection():
    config = _config()
    runtime = config["layered_runtime"]["layers"][0]["static_layer"]
    assert runtime["envoy.reloadable_features.http2_use_oghttp2"] is True
    for cluster in config["static_resources"]["clusters"]:
        options = cluster["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
        assert options["common_http_protocol_options"]["max_response_headers_kb"] == 8192
        assert options["explicit_http_config"]["http2_protocol_options"][
            "override_stream_error_on_invalid_http_message"
        ]
    manager = _manager(config["static_resources"]["listeners"][0])
    assert manager["http2_protocol_options"]["override_stream_error_on_invalid_http_message"] is True
    lua = next(f for f in manager["http_filters"] if f["name"] == "scaleout.header_limit")
    assert (
        f"local MAX_BYTES = {Limits().max_request_headers_kb * 1024}"
        in lua["typed_config"]["default_source_code"]["inline_string"]
    )
    assert manager["max_request_headers_kb"] > Limits().max_request_headers_kb


def test_envoy_takes_the_plain_and_the_secure_config(tmp_path):
    edge = _secure_edge(tmp_path)
    edge.write_sds()
    envoy = shutil.which("envoy", path=os.path.dirname(sys.executable)) or "envoy"
    for name, config in (
        ("plain", render_config(UPSTREAMS, 8080, 9901)),
        ("secure", render_config(UPSTREAMS, 8080, 9901, edge=edge, internal_port=8090)),
    ):
        path = tmp_path / f"{name}.yaml"
        path.write_text(config)
        checked = subprocess.run(
            [envoy, "--mode", "validate", "-c", str(path)], check=False, capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stderr[-2000:]


def _secure_edge(root: Path) -> Edge:
    hops = Authority(root / "certs")
    for name in ("gateway", "envoy-upstream"):
        hops.issue(name)
    Authority(root / "certs" / "clients", "clients CA")
    tls = Tls(str(hops.root / "gateway"), True, client_ca_dir=str(root / "certs" / "clients"))
    return Edge(tls=tls, mtls=Mtls(str(hops.root / "envoy-upstream")), sds_dir=str(root / "sds"))


def test_one_ca_for_clients_and_hops_is_refused(tmp_path):
    hops = Authority(tmp_path / "certs")
    gateway, upstream = hops.issue("gateway"), hops.issue("envoy-upstream")
    with pytest.raises(ValueError, match="separate CAs"):
        Edge(tls=Tls(str(gateway), True), mtls=Mtls(str(upstream)))  # both ca.crt are the hops' CA
    assert _secure_edge(tmp_path / "two").tls is not None
