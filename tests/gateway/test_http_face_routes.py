"""vLLM's render paths go to the render replicas' HTTP faces (render_svc/http_face.py) as they are, not
transcoded, where every render replica has one (devstack's plaintext stacks); without (--tls-dir: a secure
stack) they are transcoded to RenderChatVllm / RenderCompletionVllm / RenderMessagesVllm / RenderResponsesVllm. Envoy takes both configs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gateway.envoy_config import SERVICES, Endpoint, Upstream, render_config
from gateway.rest_routes import HTTP_FACES
from render_svc.http_face import METHODS, ROUTES

FACE_PATHS = ("/v1/chat/completions/render", "/v1/completions/render", "/v1/messages/render", "/v1/responses/render")


def _routes(http_port: int) -> tuple[dict, list[dict]]:
    """The rendered config, and its routes, with every render replica's HTTP face on `http_port` (0: none)."""
    upstreams = [
        Upstream(role, [Endpoint("127.0.0.1", 50051 + i, http_port if role == "render" else 0)])
        for i, role in enumerate(SERVICES)
    ]
    config = yaml.safe_load(render_config(upstreams, 8080, 9901))
    manager = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    return config, manager["route_config"]["virtual_hosts"][0]["routes"]


def test_the_gateway_and_the_face_name_the_same_methods_and_paths():
    assert set(HTTP_FACES["render"]) == set(METHODS)
    assert set(ROUTES) == set(FACE_PATHS)


def test_vllms_render_paths_are_proxied_untranscoded_to_the_faces():
    config, routes = _routes(60000)
    proxied = {r["match"]["path"]: r for r in routes if r.get("route", {}).get("cluster") == "render_http"}
    assert set(proxied) == set(FACE_PATHS)
    for route in proxied.values():
        filters = route["typed_per_filter_config"]
        assert filters["envoy.filters.http.grpc_json_transcoder"]["disabled"] is True
        assert filters["envoy.filters.http.buffer"]["buffer"]["max_request_bytes"] > 0
        assert route["route"]["retry_policy"]["retriable_status_codes"] == [429, 503]
    cluster = next(c for c in config["static_resources"]["clusters"] if c["name"] == "render_http")
    endpoint = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    assert endpoint["address"]["socket_address"]["port_value"] == 60000
    assert cluster["health_checks"][0]["http_health_check"]["path"] == "/health"
    # the typed render stays transcoded, and without faces so do vLLM's paths
    assert not any(r.get("route", {}).get("cluster") == "render_http" for r in _routes(0)[1])


@pytest.mark.slow
def test_envoy_takes_the_config(tmp_path: Path):
    envoy = shutil.which("envoy", path=str(Path(sys.executable).parent)) or shutil.which("envoy")
    assert envoy is not None
    path = tmp_path / "envoy.yaml"
    path.write_text(yaml.safe_dump(_routes(60000)[0]))
    checked = subprocess.run(
        [envoy, "--mode", "validate", "-c", str(path)], check=False, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr[-2000:]
