"""deploy/envoy.yaml is what gateway.envoy_config renders for the Kubernetes Services (regenerate when it is not)."""

import subprocess
import sys

from scaleout_common.codegen import ROOT

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
]


def test_kubernetes_envoy_config_is_fresh():
    rendered = subprocess.run(COMMAND, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert rendered == (ROOT / "deploy" / "envoy.yaml").read_text()
    assert "type: STRICT_DNS" in rendered
