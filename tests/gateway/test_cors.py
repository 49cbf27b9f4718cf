"""CORS for browser clients: off by default (no Access-Control-* headers), and with origins configured a second
Envoy in front of the same replicas answers preflights and marks responses for the allowed origins only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
import requests

from devstack.stack import free_port
from gateway.envoy_config import SERVICES, Cors, Endpoint, Upstream, render_config

ALLOWED = "https://app.example"
PREFLIGHT = {"access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type"}


def _preflight(url: str, origin: str) -> requests.Response:
    return requests.options(url + "/v1/chat/completions", headers={"origin": origin, **PREFLIGHT}, timeout=30)


@pytest.fixture(scope="module")
def cors_url(stack, tmp_path_factory):
    """Envoy rendered with a CORS policy for ALLOWED, in front of the package stack's replicas."""
    host = stack.config.host
    upstreams = [
        Upstream(role, [Endpoint(host, r.port) for r in stack.replicas if r.name.startswith(role + "-")])
        for role in SERVICES
    ]
    port, admin = free_port(host), free_port(host)
    config = tmp_path_factory.mktemp("cors") / "envoy.yaml"
    config.write_text(render_config(upstreams, port, admin, host, cors=Cors([ALLOWED])))
    envoy = shutil.which("envoy", path=os.path.dirname(sys.executable)) or shutil.which("envoy")
    process = subprocess.Popen([envoy, "-c", str(config), "--disable-hot-restart", "-l", "error"])
    url = f"http://{host}:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # until its health checks let a REST call through
            try:
                if requests.get(url + "/v1/models", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "CORS gateway did not come up"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(30)


def test_cors_is_off_by_default(stack):
    preflight = _preflight(stack.rest_url, ALLOWED)
    assert "access-control-allow-origin" not in preflight.headers
    response = requests.get(stack.rest_url + "/v1/models", headers={"origin": ALLOWED}, timeout=30)
    assert response.status_code == 200
    assert not any(name.lower().startswith("access-control-") for name in response.headers)


def test_preflight_from_an_allowed_origin(cors_url):
    preflight = _preflight(cors_url, ALLOWED)
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ALLOWED
    assert preflight.headers["access-control-allow-methods"] == "POST"
    assert preflight.headers["access-control-allow-headers"] == "authorization, content-type"
    assert int(preflight.headers["access-control-max-age"]) > 0


def test_preflight_from_another_origin_gets_no_grant(cors_url):
    preflight = _preflight(cors_url, "https://evil.example")
    assert "access-control-allow-origin" not in preflight.headers


def test_responses_and_errors_carry_the_grant(cors_url):
    ok = requests.get(cors_url + "/v1/models", headers={"origin": ALLOWED}, timeout=30)
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == ALLOWED
    assert "x-request-id" in ok.headers["access-control-expose-headers"]
    # A service's error (transcoded gRPC status) reaches the browser's script too.
    bad = requests.post(
        cors_url + "/v1/chat/completions/render",
        json={"messages": [{"role": "user", "content": "hi"}], "temperature": -1},
        headers={"origin": ALLOWED},
        timeout=30,
    )
    assert bad.status_code == 400, bad.text
    assert bad.headers["access-control-allow-origin"] == ALLOWED
    other = requests.get(cors_url + "/v1/models", headers={"origin": "https://evil.example"}, timeout=30)
    assert "access-control-allow-origin" not in other.headers
