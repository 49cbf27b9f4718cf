"""The router faces' field mappings, row by row (pipeline_svc/faces/): each foreign field from known typed
figures, the sections and filters SGLang's `/loads` takes, and the shapes' exact key sets."""

from __future__ import annotations

import pytest

from pipeline_svc.faces import sglang_server, vllm_batch_chat, vllm_server, vllm_server_info
from scaleout.v1 import engine_pb2, fleet_pb2, render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.version import VERSION

LOAD = engine_pb2.GetLoadResponse(
    running=3,
    waiting=2,
    kv_blocks_used=30,
    kv_blocks_free=70,
    kv_block_size=16,
    max_running=8,
    max_waiting=100,
    prefix_caching=True,
    kv_blocks_cached=12,
    prefix_cache_queried_tokens=1000,
    prefix_cache_hit_tokens=250,
    generated_tokens_per_s=123.456,
    pending_prefill_tokens=640,
    utilization=0.375,
)
ENGINE = fleet_pb2.EngineLoad(engine="10.0.0.7:50052", load=LOAD)
CARD = render_pb2.ModelCard(id="smol", root="/models/SmolLM2", max_model_len=8192)
INFO = engine_pb2.GetModelInfoResponse(
    architecture="LlamaForCausalLM", dtype="bfloat16", kv_block_size=16, num_kv_blocks=100, max_running=8
)


def test_sglang_load_entry_row_by_row():
    entry = sglang_server.load_entry(ENGINE, 1, [])
    assert entry == {
        "worker": "10.0.0.7:50052",
        "worker_type": "regular",
        "dp_rank": 1,
        "num_running_reqs": 3,
        "num_waiting_reqs": 2,
        "num_waiting_uncached_tokens": 640,
        "num_total_reqs": 5,
        "num_used_tokens": 480,
        "num_total_tokens": 480 + 640,
        "max_total_num_tokens": 1600,
        "max_running_requests": 8,
        "token_usage": 0.3,
        "gen_throughput": 123.46,
        "cache_hit_rate": 0.25,
        "utilization": 0.375,
    }


def test_sglang_sections_are_sglangs_names_with_what_we_know_of_them():
    assert sglang_server.sections("") == sglang_server.sections("all") == ["memory", "spec", "lora", "disagg", "queues"]
    assert sglang_server.sections("core") == []
    assert sglang_server.sections("core, disagg,queues,memory") == ["memory", "disagg", "queues"]
    entry = sglang_server.load_entry(ENGINE, 0, sglang_server.sections("all"))
    assert entry["memory"] is entry["speculative"] is entry["lora"] is entry["queues"] is None
    assert entry["disaggregation"]["mode"] == "null" and entry["disaggregation"]["kv_transfer_latency_ms"] == 0.0
    with pytest.raises(ServiceError) as refused:
        sglang_server.sections("core,bogus")
    assert refused.value.reason == "INVALID_REQUEST" and refused.value.violations[0][0] == "include"


def test_sglang_loads_body_has_an_entry_per_engine_and_smgs_totals():
    other = fleet_pb2.EngineLoad(engine="10.0.0.8:50052", load=engine_pb2.GetLoadResponse(running=1, max_running=8))
    body = sglang_server.loads_body([ENGINE, other], [], None)
    assert set(body) == {"timestamp", "version", "dp_rank_count", "loads", "aggregate"}
    assert body["version"] == VERSION and body["dp_rank_count"] == 2
    assert [e["dp_rank"] for e in body["loads"]] == [0, 1]
    assert body["aggregate"] == {
        "total_running_reqs": 4,
        "total_waiting_reqs": 2,
        "total_reqs": 6,
        "avg_token_usage": 0.15,
        "avg_throughput": 123.46 / 2,
        "avg_utilization": 0.1875,
    }
    only = sglang_server.loads_body([ENGINE, other], [], 1)
    assert [e["worker"] for e in only["loads"]] == ["10.0.0.8:50052"]
    empty = sglang_server.loads_body([], [], None)
    assert empty["loads"] == [] and empty["dp_rank_count"] == 0 and "aggregate" not in empty


def test_sglang_model_and_server_info_row_by_row():
    model = {name: value(CARD, INFO) for name, value in sglang_server.MODEL_INFO.items()}
    assert model == {
        "model_path": "/models/SmolLM2",
        "tokenizer_path": "/models/SmolLM2",
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "architectures": ["LlamaForCausalLM"],
    }
    server = {name: value(CARD, INFO) for name, value in sglang_server.SERVER_INFO.items()}
    assert server == {
        "model_path": "/models/SmolLM2",
        "tokenizer_path": "/models/SmolLM2",
        "served_model_name": "smol",
        "context_length": 8192,
        "dtype": "bfloat16",
        "kv_cache_dtype": "auto",
        "page_size": 16,
        "max_total_num_tokens": 1600,
        "max_running_requests": 8,
        "tp_size": 1,
        "pp_size": 1,
        "dp_size": 1,
        "disaggregation_mode": "null",
        "is_embedding": False,
        "weight_version": "default",
        "version": VERSION,
    }


def test_vllm_rows():
    other = fleet_pb2.EngineLoad(engine="b", load=engine_pb2.GetLoadResponse(running=4, waiting=1))
    assert {name: value([ENGINE, other]) for name, value in vllm_server.GET_LOAD.items()} == {"load": 10}
    assert {name: value(7) for name, value in vllm_server.RESET.items()} == {"success": True}
    assert {name: value([ENGINE, other]) for name, value in vllm_server.SERVER_LOAD.items()} == {"server_load": 10}


def test_vllm_server_info_row_by_row_beside_sglangs_fields():
    info = engine_pb2.GetModelInfoResponse()
    info.CopyFrom(INFO)
    info.logprobs_mode, info.device, info.weight_transfer_backend = "processed_logprobs", "cuda:0", "nccl"
    body = vllm_server_info.server_info_body(CARD, info, 3, "json")
    assert {k: v for k, v in body.items() if k not in ("vllm_config", "vllm_env")} == sglang_server.server_info(
        CARD, info
    )
    assert body["vllm_env"] == {}
    assert body["vllm_config"] == {
        "model_config": {
            "model": "/models/SmolLM2",
            "tokenizer": "/models/SmolLM2",
            "served_model_name": "smol",
            "architectures": ["LlamaForCausalLM"],
            "dtype": "bfloat16",
            "max_model_len": 8192,
            "quantization": None,
            "logprobs_mode": "processed_logprobs",
        },
        "cache_config": {"block_size": 16, "cache_dtype": "auto", "num_gpu_blocks": 100},
        "parallel_config": {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "data_parallel_size": 3},
        "scheduler_config": {"max_num_seqs": 8, "max_model_len": 8192},
        "device_config": {"device": "cuda:0"},
        "weight_transfer_config": {"backend": "nccl"},
        "lora_config": None,
        "speculative_config": None,
    }
    text = vllm_server_info.server_info_body(CARD, info, 3, "")["vllm_config"]  # vLLM's default: text
    assert text.startswith('model_config={"model": "/models/SmolLM2"') and "lora_config=null" in text
    with pytest.raises(ServiceError) as refused:
        vllm_server_info.server_info_body(CARD, info, 3, "yaml")
    assert refused.value.violations[0][0] == "config_format"
    info.lora_config.max_lora_rank, info.lora_config.max_loras, info.lora_config.max_cpu_loras = 16, 2, 4
    lora = vllm_server_info.server_info_body(CARD, info, 3, "json")["vllm_config"]["lora_config"]
    assert lora == {"max_lora_rank": 16, "max_loras": 2, "max_cpu_loras": 4}  # an engine with --enable-lora


def test_vllm_batch_chat_merges_one_choice_per_conversation():
    def answer(text: str, prompt: int) -> dict:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "token_ids": None}
        usage = {"prompt_tokens": prompt, "completion_tokens": 2, "total_tokens": prompt + 2}
        return {"id": f"chatcmpl-{text}", "object": "chat.completion", "choices": [choice], "usage": usage}

    merged = vllm_batch_chat.merged([answer("a", 5), answer("b", 7)])
    assert merged["id"] == "chatcmpl-a" and merged["prompt_token_ids"] is None
    assert vllm_batch_chat.merged([answer("a", 5)], "mine")["id"] == "chatcmpl-mine"
    assert [(c["index"], c["message"]["content"]) for c in merged["choices"]] == [(0, "a"), (1, "b")]
    assert merged["usage"] == {
        "prompt_tokens": 12,
        "total_tokens": 16,
        "completion_tokens": 4,
        "prompt_tokens_details": None,
    }
