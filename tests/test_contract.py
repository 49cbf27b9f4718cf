"""The contract: generated/ is fresh, buf lint and buf breaking pass, every non-bidi RPC has a REST binding (its
own, its relay's, or its fleet-wide twin's)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from google.api import annotations_pb2
from google.protobuf import descriptor_pb2

from scaleout.v1 import (
    chat_pb2,
    control_pb2,
    derender_pb2,
    engine_pb2,
    engine_stream_pb2,
    fleet_pb2,
    render_pb2,
    sglang_server_pb2,
    vllm_server_pb2,
)
from scaleout_common.codegen import DESCRIPTOR_SET, GENERATED, ROOT, stale_files

BUF = shutil.which("buf", path=str(Path(sys.executable).parent)) or shutil.which("buf")
# Streams REST reaches through a relay that ends them in-band when they break off (engine_stream.proto).
RELAYED = {"scaleout.v1.EngineService.Generate": "scaleout.v1.EngineStreamService.Generate"}
# One replica's control operations, which REST reaches on every replica at once (fleet.proto).
FANNED_OUT = {
    "scaleout.v1.EngineControlService.ResetPrefixCache": "scaleout.v1.FleetService.ResetPrefixCache",
    "scaleout.v1.EngineControlService.GetKvEventSources": "scaleout.v1.VllmServerService.KvEventSources",
    # The RL operations: vLLM's routes (pipeline_svc/faces/vllm_rl.py).
    "scaleout.v1.EngineControlService.Pause": "scaleout.v1.VllmServerService.Pause",
    # LoRA adapters at run time: every engine replica, then render (pipeline_svc/faces/vllm_lora.py).
    "scaleout.v1.EngineControlService.LoadLoraAdapter": "scaleout.v1.VllmServerService.LoadLoraAdapter",
    "scaleout.v1.EngineControlService.UnloadLoraAdapter": "scaleout.v1.VllmServerService.UnloadLoraAdapter",
    "scaleout.v1.RenderService.LoadLoraAdapter": "scaleout.v1.VllmServerService.LoadLoraAdapter",
    "scaleout.v1.RenderService.UnloadLoraAdapter": "scaleout.v1.VllmServerService.UnloadLoraAdapter",
    "scaleout.v1.EngineControlService.Resume": "scaleout.v1.VllmServerService.Resume",
    "scaleout.v1.EngineControlService.GetPauseState": "scaleout.v1.VllmServerService.IsPaused",
    "scaleout.v1.EngineControlService.Sleep": "scaleout.v1.VllmServerService.Sleep",
    "scaleout.v1.EngineControlService.WakeUp": "scaleout.v1.VllmServerService.WakeUp",
    "scaleout.v1.EngineControlService.GetSleepState": "scaleout.v1.VllmServerService.IsSleeping",
    "scaleout.v1.EngineControlService.InitWeightTransfer": "scaleout.v1.VllmServerService.InitWeightTransferEngine",
    "scaleout.v1.EngineControlService.StartWeightUpdate": "scaleout.v1.VllmServerService.StartWeightUpdate",
    "scaleout.v1.EngineControlService.UpdateWeights": "scaleout.v1.VllmServerService.UpdateWeights",
    "scaleout.v1.EngineControlService.FinishWeightUpdate": "scaleout.v1.VllmServerService.FinishWeightUpdate",
    "scaleout.v1.EngineControlService.SetWeightVersion": "scaleout.v1.VllmServerService.UpdateWeightVersion",
    "scaleout.v1.EngineControlService.GetWeightInfo": "scaleout.v1.VllmServerService.WeightInfo",
    "scaleout.v1.EngineControlService.ShutdownWeightTransfer": "scaleout.v1.VllmServerService.ShutdownWeightTransferEngine",
    "scaleout.v1.EngineControlService.GetWeightChecksums": "scaleout.v1.VllmServerService.WeightChecker",
    "scaleout.v1.EngineControlService.ZeroWeights": "scaleout.v1.VllmServerService.WeightChecker",
    "scaleout.v1.EngineControlService.AbortRequests": "scaleout.v1.VllmServerService.AbortRequests",
    "scaleout.v1.EngineControlService.ReleaseKvCache": "scaleout.v1.VllmServerService.ReleaseKvCacheMemory",
    # The profiler: vLLM's and SGLang's routes (pipeline_svc/faces/profile_routes.py).
    "scaleout.v1.EngineControlService.StartProfile": "scaleout.v1.VllmServerService.StartProfile",
    "scaleout.v1.EngineControlService.StopProfile": "scaleout.v1.VllmServerService.StopProfile",
}
# One replica's stream with no REST twin: a router subscribes to each replica's KV events over gRPC.
PER_REPLICA = {"scaleout.v1.EngineControlService.SubscribeKvEvents"}


def test_generated_is_fresh():
    assert stale_files() == [], "generated/ is stale: run scaleout-codegen"


@pytest.mark.skipif(BUF is None, reason="buf not installed")
def test_buf_lint():
    result = subprocess.run([BUF, "lint"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(BUF is None, reason="buf not installed")
def test_buf_breaking_against_main():
    has_main = (
        subprocess.run(
            ["git", "rev-parse", "--verify", "-q", "main"], cwd=ROOT, capture_output=True, check=False
        ).returncode
        == 0
    )
    if not has_main:
        pytest.skip("no local main branch to compare with")
    result = subprocess.run(
        [BUF, "breaking", "--against", ".git#branch=main"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _has_http_binding(method) -> bool:
    options = descriptor_pb2.MethodOptions()
    options.ParseFromString(method.GetOptions().SerializeToString())
    return options.HasExtension(annotations_pb2.http)


@pytest.mark.parametrize(
    "module",
    [
        render_pb2,
        engine_pb2,
        derender_pb2,
        chat_pb2,
        engine_stream_pb2,
        control_pb2,
        fleet_pb2,
        sglang_server_pb2,
        vllm_server_pb2,
    ],
)
def test_every_non_bidi_rpc_has_an_http_binding(module):
    for service in module.DESCRIPTOR.services_by_name.values():
        for method in service.methods:
            bidi = method.client_streaming and method.server_streaming
            if bidi or method.full_name in PER_REPLICA:
                continue
            if method.full_name in RELAYED:
                relay = module.DESCRIPTOR.pool.FindMethodByName(RELAYED[method.full_name])
                assert not _has_http_binding(method) and _has_http_binding(relay), method.full_name
                assert (relay.input_type, relay.output_type) == (method.input_type, method.output_type)
                continue
            if method.full_name in FANNED_OUT:
                twin = fleet_pb2.DESCRIPTOR.pool.FindMethodByName(FANNED_OUT[method.full_name])
                assert not _has_http_binding(method) and _has_http_binding(twin), method.full_name
                continue
            assert _has_http_binding(method), f"{method.full_name} has no google.api.http"


def test_descriptor_set_carries_error_details_for_envoy():
    descriptors = descriptor_pb2.FileDescriptorSet()
    descriptors.ParseFromString((GENERATED / DESCRIPTOR_SET).read_bytes())
    names = {f.name for f in descriptors.file}
    assert {"google/rpc/error_details.proto", "google/rpc/status.proto", "scaleout/v1/engine.proto"} <= names
