"""vLLM's RL routes through the gateway on the shared stack (pipeline_svc/faces/vllm_rl.py): the trainer example
(examples/rl_trainer.py) pushes the model's own weights over gloo in packed broadcasts (so later tests see the same
model), and pause, sleep, wake, abort, the weight checker and the refused routes answer as vLLM's routers do."""

from __future__ import annotations

import pytest
import requests
import torch.distributed as dist
from safetensors.torch import load_file

from examples import rl_trainer
from scaleout_common.models import resolve_model


def _chat(stack) -> requests.Response:
    body = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4, "temperature": 0}
    return requests.post(stack.rest_url + "/v1/chat/completions", json=body, timeout=120)


@pytest.fixture(scope="module")
def engines(stack):
    yield rl_trainer.Engines(stack.rest_url)
    if dist.is_initialized():
        dist.destroy_process_group()


def test_a_weight_update_over_gloo_with_the_trainer_example(stack, engines):
    before = _chat(stack).json()["choices"][0]["message"]["content"]
    assert engines.call("GET", "/get_world_size") == {"world_size": 1}
    assert engines.call("GET", "/weight_info") == {"weight_version": "default"}
    # A partial update (vLLM's load_weights takes any subset): the final norm and one layer, as saved.
    saved = load_file(str(resolve_model(None) / "model.safetensors"))
    state = {k: v for k, v in saved.items() if k == "model.norm.weight" or k.startswith("model.layers.3.")}
    # Packed broadcasts (vLLM's), in buffers of ~1/3 of the tensors: a few per update.
    packed_bytes = sum(t.numel() * t.element_size() for t in state.values()) // 3
    rl_trainer.init_nccl(engines, "127.0.0.1", rl_trainer.free_port(), packed_bytes=packed_bytes)
    rl_trainer.update_over_nccl(engines, state, "rl-1", packed_bytes)
    assert engines.call("GET", "/weight_info") == {"weight_version": "rl-1"}
    assert _chat(stack).json()["choices"][0]["message"]["content"] == before  # the same weights, reloaded
    assert engines.call("POST", "/update_weight_version", {"new_version": "default"}) == {
        "success": True,
        "message": "Weight version updated to default",  # SGLang's, on the same path
        "new_version": "default",
    }
    refused = requests.post(stack.rest_url + "/update_weights", json={"update_info": {"packed": True}}, timeout=30)
    assert refused.status_code == 400 and "update_info.packed" in refused.json()["error"]["message"]


def test_pause_and_sleep_answer_as_vllm(stack, engines):
    assert engines.call("POST", "/pause", mode="abort") == {"status": "paused"}
    assert engines.call("GET", "/is_paused") == {"is_paused": True}
    assert _chat(stack).status_code == 503
    assert engines.call("POST", "/resume") == {"status": "resumed"}
    assert requests.post(stack.rest_url + "/pause?mode=later", timeout=30).status_code == 400
    assert engines.call("POST", "/sleep", level=1) == {"status": "sleeping", "level": 1}
    assert engines.call("GET", "/is_sleeping") == {"is_sleeping": True}
    assert engines.call("POST", "/wake_up", tags=["kv_cache"]) == {"status": "awake", "tags": ["kv_cache"]}
    assert engines.call("GET", "/is_sleeping") == {"is_sleeping": False}
    assert _chat(stack).status_code == 200


def test_abort_release_checksums_and_the_routes_not_served(stack, engines):
    assert engines.call("POST", "/abort_requests", {}) == {"status": "aborted", "aborted": 0}
    assert engines.call("POST", "/abort_requests", {"request_ids": ["a"]}) == {"status": "aborted", "aborted": 1}
    checksums = engines.call("POST", "/weight_checker", {"action": "checksum"})["checksums"]
    assert "dp0:pp0:pcp0:tp0:model.norm.weight" in checksums
    same = engines.call("POST", "/weight_checker", {"action": "compare", "baseline": checksums})
    assert same == {"match": True, "mismatches": []}
    assert engines.call("POST", "/shutdown_weight_transfer_engine") == {"message": "Weight transfer shut down"}
    engines.call("POST", "/pause", mode="keep")
    assert engines.call("POST", "/release_kv_cache_memory") == {"status": "kv_cache_released"}
    assert engines.call("GET", "/is_sleeping") == {"is_sleeping": True}
    assert engines.call("POST", "/wake_up", tags=["kv_cache"])["status"] == "awake"
    assert engines.call("POST", "/resume") == {"status": "resumed"}  # serving again: tests/engine/test_rl_control.py
    for path in ("/collective_rpc", "/start_draft_weight_update"):
        refused = requests.post(stack.rest_url + path, json={"method": "reset_weights"}, timeout=30)
        assert refused.status_code == 501 and refused.json()["error"]["code"] == "RPC_NOT_SERVED"
