"""deploy/ is what the code renders (regenerate when it is not) and valid Kubernetes: every container runs as
non-root on a read-only root filesystem with resource limits, Envoy's admin stays on loopback, and a
NetworkPolicy denies what the request path does not need. Availability (issue 36): two replicas of every role on
different nodes with a disruption budget each, a gateway that drains before it stops, client certificates from a
CA apart from the hops', and services that refuse a call without the gateway's identity."""

import subprocess
import sys

import pytest
import yaml

from gateway.drain import ENVOY_DRAIN_ARGS
from scaleout_common.codegen import ROOT

DEPLOY = ROOT / "deploy"
COMMAND = [
    sys.executable,
    "-m",
    "gateway.envoy_config",
    "--descriptor-set",
    "/app/generated/scaleout.binpb",
    "--upstream",
    "render=render:50051",
    "--upstream",
    "engine=engine:50052",
    "--upstream",
    "derender=derender:50053",
    "--upstream",
    "chat=chat:50054",
    "--tls-dir",
    "/etc/scaleout/tls",
    "--client-ca-dir",
    "/etc/scaleout/client-ca",
    "--mtls-dir",
    "/etc/scaleout/mtls",
    "--api-keys",
    "/etc/scaleout/api-keys/keys",
    "--sds-dir",
    "/etc/envoy-sds",
    "--rate-limit-rps",
    "50",
    "--max-heap-mb",
    "1024",
    "--internal-port",
    "8090",
]
SDS_COMMAND = [
    sys.executable,
    "-m",
    "gateway.edge",
    "--tls-dir",
    "/etc/scaleout/tls",
    "--client-ca-dir",
    "/etc/scaleout/client-ca",
    "--verify-clients",
    "--mtls-dir",
    "/etc/scaleout/mtls",
    "--sds-dir",
    "/etc/envoy-sds",
]


def _documents():
    for name in ("services.yaml", "gateway.yaml", "networkpolicy.yaml", "availability.yaml"):
        for document in yaml.safe_load_all((DEPLOY / name).read_text()):
            if document:
                yield name, document


def test_kubernetes_envoy_config_is_fresh(tmp_path):
    rendered = subprocess.run(COMMAND, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert rendered == (DEPLOY / "envoy.yaml").read_text()
    assert "type: STRICT_DNS" in rendered
    config = yaml.safe_load(rendered)
    assert config["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"
    subprocess.run([*SDS_COMMAND, "--write", str(tmp_path)], cwd=ROOT, check=True)
    written = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert written == {p.name: p.read_text() for p in (DEPLOY / "sds").iterdir()}


def test_manifests_are_valid_kubernetes():
    validate = pytest.importorskip("kubernetes_validate")
    for _name, document in _documents():
        validate.validate(document, "1.37.0", strict=True)


def test_every_container_is_locked_down_and_bounded():
    kinds = set()
    for name, document in _documents():
        kinds.add(document["kind"])
        if document["kind"] != "Deployment":
            continue
        pod = document["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["automountServiceAccountToken"] is False, name
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
            limits = container["resources"]["limits"]
            assert "cpu" in limits and "memory" in limits, container["name"]
            ports = {p["containerPort"] for p in container.get("ports", [])}
            assert 9901 not in ports, "Envoy's admin is never a declared port"
            if container["name"] != "envoy":
                assert "--tls-dir=/etc/scaleout/mtls" in container["args"], "mTLS between every hop"
                assert "--require-identity" in container["args"], "keys are on: no call without an identity"
    assert {"Deployment", "Service", "NetworkPolicy", "PodDisruptionBudget"} <= kinds


def test_envoy_heap_limit_fits_its_container():
    gateway = next(d for n, d in _documents() if d["kind"] == "Deployment" and d["metadata"]["name"] == "gateway")
    memory = gateway["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    assert memory.endswith("Mi") and int(memory[:-2]) > 1024
    config = yaml.safe_load((DEPLOY / "envoy.yaml").read_text())
    heap = config["overload_manager"]["resource_monitors"][0]["typed_config"]["max_heap_size_bytes"]
    assert heap == 1024 * 1024 * 1024


def test_every_role_survives_losing_a_node_or_a_pod():
    deployments = {d["metadata"]["name"]: d for _, d in _documents() if d["kind"] == "Deployment"}
    budgets = {
        d["spec"]["selector"]["matchLabels"]["app"]: d["spec"]
        for _, d in _documents()
        if d["kind"] == "PodDisruptionBudget"
    }
    assert set(deployments) == {"gateway", "render", "engine", "derender", "chat"}
    for name, deployment in deployments.items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["replicas"] >= 2, name
        assert 1 <= budgets[labels["app"]]["minAvailable"] < deployment["spec"]["replicas"], name
        spread = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
        term = spread["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
        assert term["topologyKey"] == "kubernetes.io/hostname" and term["labelSelector"]["matchLabels"] == labels


def test_the_gateway_drains_before_it_stops():
    gateway = next(d for _, d in _documents() if d["kind"] == "Deployment" and d["metadata"]["name"] == "gateway")
    pod = gateway["spec"]["template"]["spec"]
    envoy = pod["containers"][0]
    hook = envoy["lifecycle"]["preStop"]["exec"]["command"]
    assert hook[:3] == ["python", "-m", "gateway.drain"]
    wait_s = float(hook[hook.index("--timeout-s") + 1])
    assert pod["terminationGracePeriodSeconds"] >= wait_s + 10, "the grace period covers the drain and the signal"
    assert " ".join(ENVOY_DRAIN_ARGS) in " ".join(envoy["command"])


def test_client_certificates_and_hops_have_separate_cas():
    gateway = next(d for _, d in _documents() if d["kind"] == "Deployment" and d["metadata"]["name"] == "gateway")
    volumes = {v["name"]: v for v in gateway["spec"]["template"]["spec"]["volumes"]}
    assert volumes["client-ca"]["secret"]["secretName"] not in {volumes["mtls"]["secret"]["secretName"], "gateway-tls"}
    secrets = {p.name: yaml.safe_load(p.read_text())["resources"][0] for p in (DEPLOY / "sds").iterdir()}
    clients = secrets["gateway_client_ca.yaml"]["validation_context"]["trusted_ca"]["filename"]
    hops = secrets["upstream_ca.yaml"]["validation_context"]["trusted_ca"]["filename"]
    assert clients.startswith("/etc/scaleout/client-ca/") and hops.startswith("/etc/scaleout/mtls/")
