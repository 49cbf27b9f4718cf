"""vLLM's vocabulary that the vllm: series use: their names where the face treats them apart, label values,
bucket bounds, the cache config's fields; each checked against vLLM 0.33's source (tests/engine/test_vllm_metrics.py).
"""

from __future__ import annotations

from collections.abc import Callable

from engine_svc.serving.load_figures import STEP_TOKEN_BOUNDS
from scaleout.v1.engine_pb2 import GetLoadResponse
from scaleout_common.reasons import Reason

LABELS = ["model_name", "engine"]

# vLLM's FinishReason strings in its order (vllm/v1/engine/__init__.py); ours (OpenAI's names) onto them: the
# engine never finishes with tool_calls (derender names those), where vLLM's engine says stop.
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
FINISHED_REASON = {"stop": "stop", "length": "length", "abort": "abort", "error": "error", "tool_calls": "stop"}

# vLLM's bucket families (vllm/v1/metrics/buckets.py); "request_tokens" is 1, 2, 5, 10, ... up to max_model_len.
BUCKETS: dict[str, tuple[float, ...]] = {
    "time_to_first_token": (
        *(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0),
        *(2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
    ),
    "inter_token_latency": (
        *(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0),
        *(2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0),
    ),
    "request_latency": (
        *(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0),
        *(120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0),
    ),
    "iteration_tokens": tuple(float(b) for b in STEP_TOKEN_BOUNDS),  # what the engine counts its steps into
    "request_params_n": (1.0, 2.0, 5.0, 10.0, 20.0),
    "request_num_preemptions": (1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0),
}


def request_tokens_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's build_1_2_5_buckets(max_model_len)."""
    bounds, scale = [], 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * scale > max_model_len:
                return tuple(float(b) for b in bounds)
            bounds.append(mantissa * scale)
        scale *= 10


def buckets(family: str, max_model_len: int) -> tuple[float, ...]:
    return request_tokens_buckets(max_model_len) if family == "request_tokens" else BUCKETS[family]


REQUEST_SUCCESS = "vllm:request_success"
PROMPT_TOKENS_BY_SOURCE = "vllm:prompt_tokens_by_source"
# vLLM's PromptTokenStats.ALL_SOURCES (vllm/v1/metrics/stats.py) <- our load figures.
PROMPT_SOURCES: dict[str, Callable[[GetLoadResponse], float]] = {
    "local_compute": lambda load: load.prompt_tokens_computed,
    "local_cache_hit": lambda load: load.prefix_cache_hit_tokens,
    "external_kv_transfer": lambda load: load.prompt_tokens_transferred,  # pulled from a prefill engine (P/D)
}
PROMPT_TOKENS_CACHED_BY_SOURCE = "vllm:prompt_tokens_cached_by_source"
WAITING_BY_REASON = "vllm:num_requests_waiting_by_reason"
# Series with a label of their own read from the load figures: the label, and each value's reading. vLLM's
# CacheHitSource (vllm/v1/metrics/cache_hit_source.py): no host, disk or other tiers here (0); p2p: pulled from
# a prefill engine. vLLM's waiting reasons (loggers.py): nothing waits here deferred (grammars compile and KV
# pulls land before a request joins the queue).
LABELLED: dict[str, tuple[str, dict[str, Callable[[GetLoadResponse], float]]]] = {
    PROMPT_TOKENS_BY_SOURCE: ("source", PROMPT_SOURCES),
    PROMPT_TOKENS_CACHED_BY_SOURCE: (
        "source",
        {
            "device": lambda load: load.prefix_cache_hit_tokens,
            "host": lambda load: 0,
            "p2p": lambda load: load.prompt_tokens_transferred,
            "disk": lambda load: 0,
            "external_unspecified": lambda load: 0,
        },
    ),
    WAITING_BY_REASON: ("reason", {"capacity": lambda load: load.waiting, "deferred": lambda load: 0}),
}
ADMISSION_REJECTIONS = "vllm:admission_rejections"
# vLLM's ADMISSION_REASONS (loggers.py) <- our queue limits' refusals: --max-waiting sequences, and the
# queue-wait budget (its estimate is mostly the prefill queued ahead: vLLM's TTFT valve is its queued tokens).
ADMISSION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")
ADMISSION_REASON: dict[str, str] = {
    Reason.QUEUE_FULL: "max_num_queued_reqs",
    Reason.QUEUE_WAIT_OVER_BUDGET: "max_num_queued_tokens",
}
# Counters tallied with a label of their own: the label and its values.
TALLIED_BY = {
    REQUEST_SUCCESS: ("finished_reason", FINISHED_REASONS),
    ADMISSION_REJECTIONS: ("reason", ADMISSION_REASONS),
}
ITERATION_TOKENS = "vllm:iteration_tokens_total"  # a histogram, whatever its name says: vLLM's
ENGINE_SLEEP_STATE = "vllm:engine_sleep_state"
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")  # vLLM's, for sleep levels 1 and 2
CACHE_CONFIG_INFO = "vllm:cache_config_info"
LORA_REQUESTS_INFO = "vllm:lora_requests_info"
SPEC_DECODE_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


def cache_config(load: GetLoadResponse, kv_cache_dtype: str, max_model_len: int = 0) -> dict[str, str]:
    """vllm:cache_config_info's labels: the CacheConfig fields the engine has, as vLLM writes them (str());
    `kv_cache_max_concurrency` is vLLM's: the blocks over the blocks one sequence of max_model_len takes."""
    blocks = load.kv_blocks_used + load.kv_blocks_free  # every KV block, on CPU too (vLLM's CPU backend says gpu)
    per_sequence = -(-max_model_len // load.kv_block_size) if load.kv_block_size and max_model_len else 0
    concurrency = {"kv_cache_max_concurrency": str(blocks / per_sequence)} if per_sequence else {}
    return concurrency | {
        "block_size": str(load.kv_block_size),
        "cache_dtype": kv_cache_dtype or "auto",
        "enable_prefix_caching": str(load.prefix_caching),
        "num_gpu_blocks": str(blocks),
        "num_cpu_blocks": "None",  # no blocks swapped out to the host
        "kv_cache_size_tokens": str(blocks * load.kv_block_size),
    }


def lora_info(load: GetLoadResponse) -> dict[str, str]:
    """vllm:lora_requests_info's labels: --max-loras and the adapters running and waiting, comma-joined as vLLM."""
    return {
        "max_lora": str(load.max_loras),
        "waiting_lora_adapters": ",".join(load.waiting_lora_adapters),
        "running_lora_adapters": ",".join(load.running_lora_adapters),
    }
