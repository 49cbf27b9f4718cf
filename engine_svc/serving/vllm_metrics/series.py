"""vLLM's metric names beside ours: an engine's numbers as the `vllm:` series that routers and vLLM's dashboards read.

llm-d's EPP and the Gateway API Inference Extension read the queue, running requests, KV use, `cache_config_info`
and `lora_requests_info`; vLLM's Grafana dashboards read the latency histograms and token counters. Our own
`scaleout_engine_*` series (scaleout_common.telemetry.metrics) stay as they are: this face is the one place that
knows vLLM's names, and SERIES is the whole map (per vLLM series: its type, vLLM's help text, what of ours it
reads). Names, types, help texts, labels and buckets are vLLM 0.33's (vllm/v1/metrics/loggers.py, buckets.py;
tests/engine/test_vllm_metrics.py checks them against that source). Every series carries `model_name` (the served
model name) and `engine` (--engine-id: this replica, where vLLM puts its engine core's index), so the series of a
fleet stay apart when merged (the gateway's `/metrics`).

Two sources:
- the engine's load figures (`EngineAPI.load()`), read at scrape time: requests waiting and running, KV use,
  prefix-cache queries and hits, the cache config;
- each Generate call's observations (call_summary, through LlmMetrics' observers): TTFT, inter-token latency, the
  request's phases and token counts, finish reasons, tallied per API server (../tallies.py), so whichever API
  server answers reports the whole engine and counts each request once. face.py does both.

Where the numbers differ from vLLM's (docs/observability.md):
- Requests waiting and running count sequences: a request with n > 1 counts n, as vLLM fans it out into n child
  requests (vllm/v1/engine/async_llm.py). `request_success` counts each choice as well; the per-request
  histograms count a Generate call once.
- TTFT and end to end run from the Generate call's start (vLLM: from the request's arrival at its API server).
- `vllm:time_per_output_token_seconds` is vLLM's name for the inter-token latency up to 0.10 (same samples, same
  buckets), which many dashboards still read; 0.33 exports only `vllm:inter_token_latency_seconds`.
- `vllm:lora_requests_info` is there without LoRA (vLLM: only with LoRA on), so routers find it: `max_lora` "0",
  empty adapter lists, the scrape time as its value (vLLM: the time of its last update).
- `vllm:cache_config_info` carries the CacheConfig fields the engine has (vLLM: all of them), as vLLM spells them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scaleout.v1.engine_pb2 import GetLoadResponse
from scaleout_common.telemetry.metrics import FinishedCall

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


def _inference(call: FinishedCall) -> float | None:
    return None if call.prefill is None or call.decode is None else call.prefill + call.decode


def _time_per_output_token(call: FinishedCall) -> float:
    """vLLM's mean over the request: decode time over the tokens after the first (0 for one token)."""
    gaps = call.generation_tokens - 1
    return call.decode / gaps if call.decode is not None and gaps > 0 else 0.0


def _kv_usage(load: GetLoadResponse) -> float:
    return load.kv_blocks_used / max(load.kv_blocks_used + load.kv_blocks_free, 1)


@dataclass(frozen=True)
class Series:
    name: str  # vLLM's; prometheus_client writes a counter's samples as `<name>_total`, as vLLM's
    kind: str  # "gauge", "counter" or "histogram"
    help: str  # vLLM's documentation string
    reads: str  # what of ours, in words (docs/observability.md)
    load: Callable[[GetLoadResponse], float] | None = None  # read from the load figures at scrape time
    call: Callable[[FinishedCall], float | None] | None = None  # tallied from each finished call (None: skip)
    on: str = ""  # or tallied from a streamed event: "first_token", "token_gaps"
    buckets: str = ""  # a histogram's bucket family
    same: str = ""  # or the tallies of that series, written again under this name

    @property
    def tallied(self) -> bool:
        return self.call is not None or bool(self.on)


def _histogram(name, doc, reads, buckets, call=None, on="", same=""):
    return Series(name, "histogram", doc, reads, call=call, on=on, buckets=buckets, same=same)


REQUEST_SUCCESS = "vllm:request_success"
PROMPT_TOKENS_BY_SOURCE = "vllm:prompt_tokens_by_source"
# vLLM's PromptTokenStats.ALL_SOURCES (vllm/v1/metrics/stats.py) <- our load figures.
PROMPT_SOURCES: dict[str, Callable[[GetLoadResponse], float]] = {
    "local_compute": lambda load: load.prompt_tokens_computed,
    "local_cache_hit": lambda load: load.prefix_cache_hit_tokens,
    "external_kv_transfer": lambda load: load.prompt_tokens_transferred,  # pulled from a prefill engine (P/D)
}
CACHE_CONFIG_INFO = "vllm:cache_config_info"
LORA_REQUESTS_INFO = "vllm:lora_requests_info"
SPEC_DECODE_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
SERIES: tuple[Series, ...] = (
    Series(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        "sequences running (GetLoad.running)",
        load=lambda load: load.running,
    ),
    Series(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        "sequences waiting, preempted ones included (GetLoad.waiting)",
        load=lambda load: load.waiting,
    ),
    Series(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        "KV blocks held by running sequences over all blocks, 0..1",
        load=_kv_usage,
    ),
    Series(CACHE_CONFIG_INFO, "gauge", "Information of the LLMEngine CacheConfig", "1, the cache config as labels"),
    Series(LORA_REQUESTS_INFO, "gauge", "Running stats on lora requests.", "the scrape time; no LoRA: empty labels"),
    Series(
        "vllm:prefix_cache_queries",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        "prompt tokens of the sequences admitted (GetLoad.prefix_cache_queried_tokens)",
        load=lambda load: load.prefix_cache_queried_tokens,
    ),
    Series(
        "vllm:prefix_cache_hits",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        "of those, tokens found in the prefix cache (GetLoad.prefix_cache_hit_tokens)",
        load=lambda load: load.prefix_cache_hit_tokens,
    ),
    Series(
        "vllm:num_preemptions",
        "counter",
        "Cumulative number of preemption from the engine.",
        "sequences preempted under KV pressure (GetLoad.preemptions)",
        load=lambda load: load.preemptions,
    ),
    Series(
        "vllm:prompt_tokens",
        "counter",
        "Number of prefill tokens processed.",
        "each call's prompt tokens",
        call=lambda c: c.prompt_tokens,
    ),
    Series(
        PROMPT_TOKENS_BY_SOURCE,
        "counter",
        "Number of prompt tokens by source.",
        "prompt tokens computed here, found in the prefix cache, pulled from a prefill engine (GetLoad)",
    ),
    Series(
        "vllm:generation_tokens",
        "counter",
        "Number of generation tokens processed.",
        "each call's generated tokens",
        call=lambda c: c.generation_tokens,
    ),
    Series(REQUEST_SUCCESS, "counter", "Count of successfully processed requests.", "each finished choice"),
    _histogram(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        "TTFT from the call's start (as scaleout_engine_time_to_first_token_seconds)",
        "time_to_first_token",
        on="first_token",
    ),
    _histogram(
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        "one sample per token after the first (as scaleout_engine_inter_token_latency_seconds)",
        "inter_token_latency",
        on="token_gaps",
    ),
    _histogram(
        "vllm:time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
        "the same samples: vLLM's name for them up to 0.10",
        "inter_token_latency",
        same="vllm:inter_token_latency_seconds",
    ),
    _histogram(
        "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
        "decode time over the tokens after the first, per call",
        "inter_token_latency",
        call=_time_per_output_token,
    ),
    _histogram(
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        "the call's start to its end",
        "request_latency",
        call=lambda c: c.e2e,
    ),
    _histogram(
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        "the engine's time in queue",
        "request_latency",
        call=lambda c: c.queue,
    ),
    _histogram(
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        "scheduled to first token",
        "request_latency",
        call=lambda c: c.prefill,
    ),
    _histogram(
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        "first to last token",
        "request_latency",
        call=lambda c: c.decode,
    ),
    _histogram(
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        "prefill + decode",
        "request_latency",
        call=_inference,
    ),
    _histogram(
        "vllm:request_prompt_tokens",
        "Number of prefill tokens processed.",
        "the call's prompt tokens",
        "request_tokens",
        call=lambda c: c.prompt_tokens,
    ),
    _histogram(
        "vllm:request_generation_tokens",
        "Number of generation tokens processed.",
        "the call's generated tokens",
        "request_tokens",
        call=lambda c: c.generation_tokens,
    ),
    # Speculative decoding: vLLM's SpecDecodingProm (vllm/v1/spec_decode/metrics.py), shown only with it on.
    Series(
        "vllm:spec_decode_num_drafts",
        "counter",
        "Number of spec decoding drafts.",
        "verify steps of a drafted sequence (GetLoad.spec_decode_num_drafts)",
        load=lambda load: load.spec_decode_num_drafts,
    ),
    Series(
        "vllm:spec_decode_num_draft_tokens",
        "counter",
        "Number of draft tokens.",
        "draft tokens proposed, n-gram or draft model (GetLoad.spec_decode_num_draft_tokens)",
        load=lambda load: load.spec_decode_num_draft_tokens,
    ),
    Series(
        "vllm:spec_decode_num_accepted_tokens",
        "counter",
        "Number of accepted tokens.",
        "of those, accepted (GetLoad.spec_decode_num_accepted_tokens)",
        load=lambda load: load.spec_decode_num_accepted_tokens,
    ),
    Series(
        SPEC_DECODE_PER_POS,
        "counter",
        "Accepted tokens per draft position.",
        "accepted tokens by draft position, label `position` (GetLoad.spec_decode_num_accepted_tokens_per_pos)",
    ),
)


def cache_config(load: GetLoadResponse, kv_cache_dtype: str) -> dict[str, str]:
    """vllm:cache_config_info's labels: the CacheConfig fields the engine has, as vLLM writes them (str())."""
    blocks = load.kv_blocks_used + load.kv_blocks_free  # every KV block, on CPU too (vLLM's CPU backend says gpu)
    return {
        "block_size": str(load.kv_block_size),
        "cache_dtype": kv_cache_dtype or "auto",
        "enable_prefix_caching": str(load.prefix_caching),
        "num_gpu_blocks": str(blocks),
        "num_cpu_blocks": "None",  # no blocks swapped out to the host
        "kv_cache_size_tokens": str(blocks * load.kv_block_size),
    }
