"""vLLM's metric names beside ours: an engine's numbers as the `vllm:` series that routers and vLLM's dashboards read.

llm-d's EPP and the Gateway API Inference Extension read the queue, running requests, KV use, `cache_config_info`
and `lora_requests_info`; vLLM's Grafana dashboards read the latency histograms and token counters. Our own
`scaleout_engine_*` series (scaleout_common.telemetry.metrics) stay as they are: this face is the one place that
knows vLLM's names, and SERIES is the whole map (per vLLM series: its type, vLLM's help text, what of ours it
reads). Names, types, help texts, labels and buckets are vLLM 0.33's (vllm/v1/metrics/loggers.py, buckets.py;
tests/engine/test_vllm_metrics.py checks them against that source). Every series carries `model_name` (the served
model name) and `engine` (--engine-id: this replica, where vLLM puts its engine core's index), so the series of a
fleet stay apart when merged (the gateway's `/metrics`).

Three sources:
- the engine's load figures (`pooling.counted_load`, a pooler's inputs counted with the sequences; its steps by
  their tokens and its sleep state), read at scrape time: requests waiting and running, KV use, prefix-cache queries and hits, the cache config;
- each Generate call's observations (call_summary, through LlmMetrics' observers): TTFT, inter-token latency, the
  request's phases and token counts, finish reasons;
- the engine front's requests (its RequestObserver): each request's figures as its call ends (n, max_tokens,
  preemptions, prompt tokens computed) and the refusals by a queue limit.
The last two are tallied per API server (../tallies.py), so whichever API server answers reports the whole engine
and counts each request once. face.py does all three.

Where the numbers differ from vLLM's (docs/observability.md):
- Requests waiting and running count sequences: a request with n > 1 counts n, as vLLM fans it out into n child
  requests (vllm/v1/engine/async_llm.py). `request_success` counts each choice as well; the per-request
  histograms count a Generate call once.
- TTFT and end to end run from the Generate call's start (vLLM: from the request's arrival at its API server).
- `vllm:time_per_output_token_seconds` is vLLM's name for the inter-token latency up to 0.10 (same samples, same
  buckets), which many dashboards still read; 0.33 exports only `vllm:inter_token_latency_seconds`.
- `vllm:lora_requests_info` (only with LoRA on, as vLLM): one sample, the adapters running and waiting at the
  scrape, the scrape time as its value (vLLM: a sample per label set it has seen, each at its last update's time).
- `vllm:cache_config_info` carries the CacheConfig fields the engine has (vLLM: all of them), as vLLM spells them.
- `vllm:admission_rejections` carries `engine` too (vLLM: only `model_name` and `reason`, one API server's).
vLLM's series not made here, and why: docs/observability.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine_svc.serving.requests import EndedRequest
from engine_svc.serving.vllm_metrics.vocab import (
    ADMISSION_REJECTIONS,
    CACHE_CONFIG_INFO,
    ENGINE_SLEEP_STATE,
    ITERATION_TOKENS,
    LORA_REQUESTS_INFO,
    PROMPT_TOKENS_BY_SOURCE,
    PROMPT_TOKENS_CACHED_BY_SOURCE,
    REQUEST_SUCCESS,
    SPEC_DECODE_PER_POS,
    TALLIED_BY,
    WAITING_BY_REASON,
)
from scaleout.v1.engine_pb2 import GetLoadResponse
from scaleout_common.telemetry.metrics import FinishedCall


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
    ended: Callable[[EndedRequest], float] | None = None  # or from each request's figures as its call ends
    on: str = ""  # or tallied from a streamed event: "first_token", "token_gaps"
    buckets: str = ""  # a histogram's bucket family
    same: str = ""  # or the tallies of that series, written again under this name

    @property
    def tallied(self) -> bool:
        return self.call is not None or self.ended is not None or bool(self.on) or self.name in TALLIED_BY


def _histogram(name, doc, reads, buckets, call=None, on="", same="", ended=None):
    return Series(name, "histogram", doc, reads, call=call, on=on, buckets=buckets, same=same, ended=ended)


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
        WAITING_BY_REASON,
        "gauge",
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
        "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all "
        "reasons equals vllm:num_requests_waiting.",
        "`capacity`: the sequences waiting; `deferred`: 0 (nothing here waits on a transient constraint)",
    ),
    Series(
        ENGINE_SLEEP_STATE,
        "gauge",
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
        "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        "`sleep_state` `awake`, `weights_offloaded`, `discard_all` from the engine's sleep level (Sleep/WakeUp)",
    ),
    Series(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        "KV blocks held by running sequences over all blocks, 0..1",
        load=_kv_usage,
    ),
    Series(CACHE_CONFIG_INFO, "gauge", "Information of the LLMEngine CacheConfig", "1, the cache config as labels"),
    Series(
        LORA_REQUESTS_INFO,
        "gauge",
        "Running stats on lora requests.",
        "the scrape time; GetLoad's LoRA fields (LoRA off: absent)",
    ),
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
        "vllm:prompt_tokens_cached",
        "counter",
        "Number of cached prompt tokens (local + external).",
        "prompt tokens found in the prefix cache or pulled from a prefill engine",
        load=lambda load: load.prefix_cache_hit_tokens + load.prompt_tokens_transferred,
    ),
    Series(
        PROMPT_TOKENS_CACHED_BY_SOURCE,
        "counter",
        "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host (offloaded to "
        "DRAM), disk, p2p (transferred from another vLLM instance) or external_unspecified. Counted at admission; "
        "sums to vllm:prefix_cache_hits + vllm:external_prefix_cache_hits.",
        "`source` `device`: the prefix cache's hits; `p2p`: pulled from a prefill engine; the other tiers 0",
    ),
    Series(
        "vllm:generation_tokens",
        "counter",
        "Number of generation tokens processed.",
        "each call's generated tokens",
        call=lambda c: c.generation_tokens,
    ),
    Series(REQUEST_SUCCESS, "counter", "Count of successfully processed requests.", "each finished choice"),
    Series(
        ADMISSION_REJECTIONS,
        "counter",
        "Number of admission attempts rejected by a queue limit, by reason.",
        "refusals by `reason`: `max_num_queued_reqs` QUEUE_FULL (--max-waiting), `max_num_queued_tokens` "
        "QUEUE_WAIT_OVER_BUDGET (--max-queue-wait-s)",
    ),
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
    _histogram(
        ITERATION_TOKENS,
        "Histogram of number of tokens per engine_step.",
        "per step: prompt tokens computed + tokens sampled",
        "iteration_tokens",
    ),
    _histogram(
        "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        "the call's longest choice, in tokens",
        "request_tokens",
        ended=lambda r: r.max_generated,
    ),
    _histogram(
        "vllm:request_params_n",
        "Histogram of the n request parameter.",
        "the call's n",
        "request_params_n",
        ended=lambda r: r.n,
    ),
    _histogram(
        "vllm:request_params_max_tokens",
        "Histogram of the max_tokens request parameter.",
        "the call's max_tokens (as the engine applied it)",
        "request_tokens",
        ended=lambda r: r.max_tokens,
    ),
    _histogram(
        "vllm:request_num_preemptions",
        "Histogram of the number of times a request was preempted.",
        "the call's sequences' preemptions",
        "request_num_preemptions",
        ended=lambda r: r.preemptions,
    ),
    _histogram(
        "vllm:request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        "the call's prompt tokens less those cached or pulled",
        "request_tokens",
        ended=lambda r: r.prompt_tokens - r.cached_tokens,
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
