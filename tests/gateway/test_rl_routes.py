"""vLLM's RL routes through the gateway on the shared stack (pipeline_svc/faces/vllm_rl.py): the trainer example
(examples/rl_trainer.py) pushes the model's own weights over gloo (so later tests see the same model), and pause,
sleep and wake answer as vLLM's routers do."""

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
    rl_trainer.init_nccl(engines, "127.0.0.1", rl_trainer.free_port())
    rl_trainer.update_over_nccl(engines, state, "rl-1")
    assert engines.call("GET", "/weight_info") == {"weight_version": "rl-1"}
    assert _chat(stack).json()["choices"][0]["message"]["content"] == before  # the same weights, reloaded
    assert engines.call("POST", "/update_weight_version", {"new_version": "default"}) == {
        "success": True,
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
