"""SGLang's RL routes through the gateway (pipeline_svc/faces/sglang_rl.py), called as slime's SGLang client calls
them (JSON POSTs, `raise_for_status`): a weight update from a safetensors folder (a stack of its own, its engines on
the disk backend), a torch.distributed update over gloo from a trainer that joins as SGLang's trainers do (its
rendezvous: torch's tcp:// store, the group's keys under its name), pause and continue with streams in flight,
releasing and resuming memory, aborts by rid and all, and the refusals naming their fields."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
import torch
from safetensors.torch import load_file, save_file

from devstack.stack import Stack, StackConfig
from examples.rl_trainer import free_port, join_sglang_group
from scaleout_common.models import resolve_model

pytestmark = pytest.mark.slow


def post(stack, path: str, body: dict | None = None) -> requests.Response:
    return requests.post(stack.rest_url + path, json=body if body is not None else {}, timeout=300)


def ok(stack, path: str, body: dict | None = None):
    """slime's `_make_request`: a POST whose failure raises; the JSON answer."""
    reply = post(stack, path, body)
    reply.raise_for_status()
    return reply.json()


def greedy(stack, tokens: int = 8) -> str:
    body = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": tokens, "temperature": 0}}
    reply = post(stack, "/generate", body)
    reply.raise_for_status()
    return reply.json()["text"]


def stream(stack, rid: str, tokens: int = 1500):
    """A streamed /generate (rid named): its events, read on a thread; set once the first arrived."""
    first, events = threading.Event(), []
    body = {
        "text": "Once upon a time",
        "rid": rid,
        "stream": True,
        "sampling_params": {"max_new_tokens": tokens, "temperature": 0, "ignore_eos": True},
    }

    def read():
        with requests.post(stack.rest_url + "/generate", json=body, stream=True, timeout=300) as reply:
            for line in reply.iter_lines():
                if line.startswith(b"data: {"):
                    events.append((time.monotonic(), json.loads(line[6:])))
                    first.set()
        first.set()

    thread = threading.Thread(target=read)
    thread.start()
    assert first.wait(60)
    return thread, events


def refused(reply: requests.Response, status: int, param: str) -> None:
    assert reply.status_code == status, reply.text
    assert reply.json()["error"]["param"] == param, reply.text


@pytest.fixture(scope="module")
def disk_stack(tmp_path_factory):
    config = StackConfig(
        port=0,
        log_dir=tmp_path_factory.mktemp("sglang-disk-logs"),
        service_args={"engine": ["--weight-transfer-backend", "disk"]},
    )
    with Stack(config) as running:
        yield running


def test_a_weight_update_from_disk(disk_stack, tmp_path):
    model = resolve_model(None)
    before = greedy(disk_stack)
    assert requests.get(disk_stack.rest_url + "/get_weight_version", timeout=30).json() == {"weight_version": "default"}
    saved = load_file(str(model / "model.safetensors"))
    save_file({"model.norm.weight": saved["model.norm.weight"] * -3.0}, str(tmp_path / "model.safetensors"))
    answer = ok(disk_stack, "/update_weights_from_disk", {"model_path": str(tmp_path), "weight_version": "step-1"})
    assert answer == {
        "success": True,
        "message": "Succeeded to update model weights. Weight version updated to step-1.",
        "num_paused_requests": 0,
    }
    assert requests.get(disk_stack.rest_url + "/get_weight_version", timeout=30).json() == {"weight_version": "step-1"}
    assert greedy(disk_stack) != before
    # slime's colocated order: release all, resume the weights, update them, resume the KV cache.
    assert ok(disk_stack, "/release_memory_occupation") is None
    assert ok(disk_stack, "/resume_memory_occupation", {"tags": ["weights"]}) is None
    ok(disk_stack, "/update_weights_from_disk", {"model_path": str(model), "load_format": "auto"})  # the whole model
    assert ok(disk_stack, "/resume_memory_occupation", {"tags": ["kv_cache"]}) is None
    assert greedy(disk_stack) == before
    refused(
        post(disk_stack, "/update_weights_from_disk", {"model_path": str(model), "is_async": True}), 400, "is_async"
    )
    missing = post(disk_stack, "/update_weights_from_disk", {"load_format": "auto"})
    refused(missing, 400, "model_path")
    assert missing.json()["success"] is False  # SGLang's failure keys, beside the error object
    assert missing.json()["message"] == missing.json()["error"]["message"]
    refused(post(disk_stack, "/update_weights_from_disk", {"model_path": str(tmp_path / "none")}), 400, "model_path")


def test_a_distributed_update_over_gloo(stack):
    model = resolve_model(None)
    before = greedy(stack)
    name, port = "slime-pp_0", free_port()
    init = {"master_address": "127.0.0.1", "master_port": port, "rank_offset": 1, "world_size": 2}
    init |= {"group_name": name, "backend": "gloo"}
    with ThreadPoolExecutor(1) as pool:
        joined = pool.submit(ok, stack, "/init_weights_update_group", init)
        send = join_sglang_group("127.0.0.1", port, 2, name)
        assert joined.result() == {"success": True, "message": "Succeeded to initialize custom process group."}
    saved = load_file(str(model / "model.safetensors"))
    state = {k: v for k, v in saved.items() if k == "model.norm.weight" or k.startswith("model.layers.1.")}

    def update(tensors: dict[str, torch.Tensor], version: str) -> dict:
        body = {  # slime's update_weights_from_distributed
            "names": list(tensors),
            "dtypes": [str(t.dtype).replace("torch.", "") for t in tensors.values()],
            "shapes": [list(t.shape) for t in tensors.values()],
            "group_name": name,
            "flush_cache": False,
            "weight_version": version,
        }
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(ok, stack, "/update_weights_from_distributed", body)
            for tensor in tensors.values():
                send(tensor.contiguous())
            return answer.result()

    ok(stack, "/pause_generation")  # slime: pause, flush, update, continue
    changed = {k: (v * -3.0 if k == "model.norm.weight" else v) for k, v in state.items()}
    assert update(changed, "1") == {
        "success": True,
        "message": "Succeeded to update parameter online. Weight version updated to 1.",
    }
    ok(stack, "/continue_generation")
    assert greedy(stack) != before
    assert update(state, "2")["success"]
    assert requests.get(stack.rest_url + "/get_weight_version", timeout=30).json() == {"weight_version": "2"}
    assert greedy(stack) == before
    refused(
        post(stack, "/update_weights_from_distributed", {"names": [], "dtypes": [], "shapes": []}), 400, "group_name"
    )
    wrong = {"names": ["x"], "dtypes": ["float32"], "shapes": [[1, 2]], "group_name": name}
    refused(
        post(stack, "/update_weights_from_distributed", wrong | {"load_format": "flattened_bucket"}), 400, "load_format"
    )
    assert ok(stack, "/destroy_weights_update_group", {"group_name": name}) == {
        "success": True,
        "message": "Succeeded to destroy custom process group.",
    }
    refused(post(stack, "/destroy_weights_update_group", {"group_name": name}), 400, "group_name")
    refused(post(stack, "/init_weights_update_group", init | {"backend": "nccl"}), 400, "group_backend")
    assert ok(stack, "/update_weight_version", {"new_version": "default"})["new_version"] == "default"


def test_pause_in_place_freezes_streams_and_continue_finishes_them(stack):
    thread, events = stream(stack, "held", tokens=64)
    assert ok(stack, "/pause_generation", {"mode": "in_place"}) == {
        "message": "Generation paused successfully.",
        "status": "ok",
    }
    time.sleep(0.5)
    frozen = len(events)
    time.sleep(0.5)
    assert len(events) == frozen and thread.is_alive()  # nothing generated while paused
    queued = ThreadPoolExecutor(1).submit(greedy, stack)  # a new request waits for /continue_generation
    time.sleep(0.3)
    assert not queued.done()
    assert ok(stack, "/continue_generation", {}) == {"message": "Generation continued successfully.", "status": "ok"}
    thread.join(240)
    assert queued.result(60)
    assert events[-1][1]["meta_info"]["finish_reason"]["type"] == "length"
    assert len(events[-1][1]["output_ids"]) == 64


def test_pause_abort_ends_streams_and_aborts_by_rid_and_all(stack):
    thread, events = stream(stack, "doomed")
    ok(stack, "/pause_generation", {"mode": "abort"})
    thread.join(60)
    assert events[-1][1]["meta_info"]["finish_reason"]["type"] == "abort"
    ok(stack, "/continue_generation")
    thread, events = stream(stack, "by-rid")
    other, others = stream(stack, "bystander", tokens=24)
    reply = post(stack, "/abort_request", {"rid": "by-rid"})
    assert reply.status_code == 200 and reply.content == b""
    thread.join(60)
    assert events[-1][1]["meta_info"]["finish_reason"]["type"] == "abort"
    other.join(240)
    assert others[-1][1]["meta_info"]["finish_reason"]["type"] == "length"
    streams = [stream(stack, f"all-{i}") for i in range(2)]
    assert post(stack, "/abort_request", {"abort_all": True}).status_code == 200
    for thread, events in streams:
        thread.join(60)
        assert events[-1][1]["meta_info"]["finish_reason"]["type"] == "abort"
    refused(post(stack, "/pause_generation", {"mode": "later"}), 400, "mode")
    refused(post(stack, "/abort_request", {"rid": "a", "abort_message": "x"}), 400, "abort_message")


def test_release_and_resume_memory(stack):
    before = greedy(stack)
    assert ok(stack, "/release_memory_occupation") is None  # slime's: all tags
    assert ok(stack, "/resume_memory_occupation", {"tags": ["weights"]}) is None
    assert ok(stack, "/resume_memory_occupation", {"tags": ["kv_cache"]}) is None
    assert greedy(stack) == before
    assert ok(stack, "/release_memory_occupation", {"tags": ["kv_cache"]}) is None
    assert requests.get(stack.rest_url + "/resume_memory_occupation", timeout=60).status_code == 200  # GET: all
    assert greedy(stack) == before
    refused(post(stack, "/release_memory_occupation", {"tags": ["weights"]}), 400, "tags")
    refused(post(stack, "/resume_memory_occupation", {"tags": ["cuda_graph"]}), 400, "tags")


def test_the_routes_refused(stack):
    refused(
        post(stack, "/update_weights_from_tensor", {"serialized_named_tensors": ["eA=="]}),
        501,
        "serialized_named_tensors",
    )
    refused(post(stack, "/get_weights_by_name", {"name": "model.norm.weight", "truncate_size": 4}), 501, "name")
    assert "success" not in post(stack, "/pause_generation", {"mode": "later"}).json()  # SGLang's error object
    refused(post(stack, "/update_weights_from_disk", {"model_path": "/w"}), 400, "model_path")  # an nccl stack
    refused(post(stack, "/init_weights_update_group", {"master_address": "h"}), 400, "master_port")
