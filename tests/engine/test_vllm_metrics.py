"""The vllm: face (engine_svc/serving/vllm_metrics/): its table against vLLM 0.33's own source, and a real engine
(tiny random Llama) answering GetMetrics with vLLM's series, types, labels and the numbers of the calls it served,
counted once however many API servers served them."""

from __future__ import annotations

import ast
import asyncio
import functools
import importlib.metadata
import importlib.util
import urllib.request
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine_svc.__main__ import make_parser
from engine_svc.serving.loader import build_engine
from engine_svc.serving.service import EngineService
from engine_svc.serving.vllm_metrics import vocab as vllm_metrics
from engine_svc.serving.vllm_metrics.series import SERIES
from scaleout.v1 import engine_pb2, engine_pb2_grpc
from scaleout_common.reasons import Reason
from tests.engine.conftest import build_tiny, engine_stub, generate, request, tiny_model  # noqa: F401  (fixture)
from tests.engine.test_admission import reason_of
from tests.observability.toy import serving

VLLM = Path(
    str(importlib.metadata.distribution("vllm").locate_file("vllm"))
)  # make setup installs vLLM 0.33 (its sources read)
PROMPT = [1, 5, 6, 7, 8, 9, 10, 11, 12]  # two whole blocks of 4 and one token: a repeat hits 8 tokens
NEW_TOKENS = 6
LONG = 40  # tokens a call of test_api_servers_count_each_call_once makes: 13 blocks of 4 with its prompt
OLD_NAMES = {"vllm:time_per_output_token_seconds"}  # vLLM <= 0.10's; 0.33 no longer defines it
# vLLM 0.33's PrometheusStatLogger series we do not make (docs/observability.md says why), the rest conditional
# there too (a KV connector, VLLM_COMPUTE_NANS_IN_LOGITS, watermarking, --kv-cache-metrics).
LEFT_OUT = {
    "vllm:external_prefix_cache_queries",
    "vllm:external_prefix_cache_hits",
    "vllm:mm_cache_queries",
    "vllm:mm_cache_hits",
    "vllm:num_requests_kv_fetch_by_stage",
    "vllm:corrupted_requests",
    "vllm:watermark_requests",
    "vllm:kv_block_lifetime_seconds",
    "vllm:kv_block_idle_before_evict_seconds",
    "vllm:kv_block_reuse_gap_seconds",
}


def _vllm_source(relative: str) -> ast.Module:
    return ast.parse((VLLM / relative).read_text())


def _vllm_metrics() -> dict[str, dict]:
    """Every metric vLLM's PrometheusStatLogger makes: name -> kind, help, labels, bucket family."""
    tree = _vllm_source("v1/metrics/loggers.py")
    families = {  # `ttft_buckets = histogram_buckets("time_to_first_token", ...)`: variable -> family
        node.targets[0].id: node.value.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and getattr(node.value.func, "id", "") == "histogram_buckets"
    }
    metrics = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in (
            "_gauge_cls",
            "_counter_cls",
            "_histogram_cls",
        ):
            kw = {k.arg: k.value for k in node.keywords}
            if not isinstance(kw.get("name"), ast.Constant):
                continue  # cache_config_info: named by a variable
            metrics[kw["name"].value] = {
                "kind": node.func.attr.strip("_").removesuffix("_cls"),
                "help": kw["documentation"].value,
                "labels": ast.unparse(kw["labelnames"]),
                "buckets": families.get(getattr(kw.get("buckets"), "id", None)),
            }
    return metrics


def test_the_table_is_vllms():
    theirs = _vllm_metrics()
    assert set(theirs) - {s.name for s in SERIES} == LEFT_OUT
    spec_decode = ast.unparse(_vllm_source("v1/spec_decode/metrics.py"))
    for series in SERIES:
        if series.name in OLD_NAMES:
            continue
        if series.name.startswith("vllm:spec_decode"):  # SpecDecodingProm: (name, help) pairs, per_pos by itself
            pair = f"({series.name!r}, {series.help!r})" in spec_decode
            assert pair or f"name={series.name!r}, documentation={series.help!r}" in spec_decode, series.name
            continue
        if series.name == vllm_metrics.CACHE_CONFIG_INFO:  # named through a variable in log_metrics_info
            assert f"name = {series.name!r}" in ast.unparse(_vllm_source("v1/metrics/loggers.py"))
            continue
        vllm = theirs[series.name]
        assert (series.kind, series.help) == (vllm["kind"], vllm["help"]), series.name
        assert series.buckets == (vllm["buckets"] or ""), series.name
        expected = {
            vllm_metrics.REQUEST_SUCCESS: "labelnames + ['finished_reason']",
            vllm_metrics.PROMPT_TOKENS_BY_SOURCE: "labelnames + ['source']",
            vllm_metrics.PROMPT_TOKENS_CACHED_BY_SOURCE: "labelnames + ['source']",
            vllm_metrics.WAITING_BY_REASON: "labelnames + ['reason']",
            vllm_metrics.ENGINE_SLEEP_STATE: "labelnames + ['sleep_state']",
            vllm_metrics.ADMISSION_REJECTIONS: "['model_name', 'reason']",  # ours add `engine`, as every series
            vllm_metrics.LORA_REQUESTS_INFO: "[self.labelname_max_lora, self.labelname_waiting_lora_adapters, "
            "self.labelname_running_lora_adapters]",
        }.get(series.name, "labelnames")
        assert vllm["labels"] == expected, series.name
    # vLLM's bucket bounds, finish reasons and CacheConfig field names, from its own modules.
    spec = importlib.util.spec_from_file_location("vllm_buckets", VLLM / "v1/metrics/buckets.py")
    buckets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(buckets)
    for family, bounds in vllm_metrics.BUCKETS.items():
        assert bounds == tuple(buckets.histogram_buckets(family)), family
    for max_model_len in (1, 9, 100, 2048, 131072):
        assert vllm_metrics.request_tokens_buckets(max_model_len) == tuple(buckets.build_1_2_5_buckets(max_model_len))
    loggers = ast.unparse(_vllm_source("v1/metrics/loggers.py"))
    assert f"ADMISSION_REASONS = {vllm_metrics.ADMISSION_REASONS!r}" in loggers
    assert f"sleep_state = {list(vllm_metrics.SLEEP_STATES)!r}" in loggers
    waiting_reasons = dict(vllm_metrics.LABELLED[vllm_metrics.WAITING_BY_REASON][1])
    assert [f"WAITING_REASON_{r.upper()} = {r!r}" in loggers for r in waiting_reasons] == [True, True]
    hit_sources = ast.unparse(_vllm_source("v1/metrics/cache_hit_source.py"))
    tiers = vllm_metrics.LABELLED[vllm_metrics.PROMPT_TOKENS_CACHED_BY_SOURCE][1]
    assert [f"{t.upper()} = {t!r}" in hit_sources for t in tiers] == [True] * 5
    stats = ast.unparse(_vllm_source("v1/metrics/stats.py"))
    assert f"ALL_SOURCES: tuple[str, ...] = {tuple(vllm_metrics.PROMPT_SOURCES)!r}" in stats
    engine_init = ast.unparse(_vllm_source("v1/engine/__init__.py"))
    assert f"FINISH_REASON_STRINGS = {vllm_metrics.FINISHED_REASONS!r}" in engine_init
    cache = next(n for n in ast.walk(_vllm_source("config/cache.py")) if getattr(n, "name", "") == "CacheConfig")
    fields = {n.target.id for n in cache.body if isinstance(n, ast.AnnAssign)}
    load = engine_pb2.GetLoadResponse(kv_block_size=16, kv_blocks_free=1024)
    config = vllm_metrics.cache_config(load, "", max_model_len=8192)
    assert set(config) <= fields and config["kv_cache_max_concurrency"] == "2.0"  # 1024 blocks / 512 a sequence


def test_docs_name_every_series():
    docs = (Path(__file__).parents[2] / "docs" / "observability.md").read_text()
    assert [s.name for s in SERIES if f"`{s.name}`" not in docs] == []


def _families(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


def _scrape(url: str) -> str:
    return urllib.request.urlopen(url, timeout=5).read().decode()


def _value(families, name: str, sample: str | None = None, **labels) -> float:
    return next(
        s.value
        for s in families[name].samples
        if s.name == (sample or name) and all(s.labels.get(k) == v for k, v in labels.items())
    )


async def test_a_real_engine_reports_its_calls(tiny_model):  # noqa: F811
    args = make_parser().parse_args(["--block-size", "4", "--engine-id", "replica-a", "--max-waiting", "4"])
    service = EngineService(args, build=lambda: build_engine(tiny_model, args, model_name="tiny"))
    async with serving(service, metrics=True) as served, grpc.aio.insecure_channel(served.target) as channel:
        stub = engine_pb2_grpc.EngineServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:  # more sequences than may wait
            await stub.GenerateUnary(request(PROMPT, n=5, max_tokens=NEW_TOKENS))
        assert reason_of(refused.value) == Reason.QUEUE_FULL
        await generate(stub, request(PROMPT, temperature=0, max_tokens=NEW_TOKENS, ignore_eos=True))
        await stub.GenerateUnary(request(PROMPT, temperature=0, max_tokens=NEW_TOKENS, ignore_eos=True))
        await generate(stub, request(PROMPT[:3], temperature=0, max_tokens=1))
        body = await stub.GetMetrics(engine_pb2.GetMetricsRequest())
        load = await stub.GetLoad(engine_pb2.GetLoadRequest())
        port = _families(await asyncio.to_thread(_scrape, served.metrics_url))
    families = _families(body.data.decode())

    assert body.content_type.startswith("text/plain")
    assert not any(name.startswith("vllm:spec_decode") for name in families)  # speculation off: none, as vLLM
    for series in SERIES:
        if series.name.startswith("vllm:spec_decode") or series.name == vllm_metrics.LORA_REQUESTS_INFO:
            continue  # tests/engine/test_speculation.py, test_lora_routing.py
        family = families[series.name]
        assert family.type == series.kind and family.documentation == series.help, series.name
        for sample in family.samples:
            assert (sample.labels["model_name"], sample.labels["engine"]) == ("tiny", "replica-a"), sample
    calls, prompt_tokens, new_tokens = 3, 2 * len(PROMPT) + 3, 2 * NEW_TOKENS + 1
    assert _value(families, "vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_count") == calls
    assert _value(families, "vllm:e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds_count") == calls
    assert _value(families, "vllm:request_queue_time_seconds", "vllm:request_queue_time_seconds_count") == calls
    itl = _value(families, "vllm:inter_token_latency_seconds", "vllm:inter_token_latency_seconds_count")
    assert itl == 2 * (NEW_TOKENS - 1)
    assert _value(families, "vllm:time_per_output_token_seconds", "vllm:time_per_output_token_seconds_count") == itl
    assert _value(families, "vllm:prompt_tokens", "vllm:prompt_tokens_total") == prompt_tokens
    assert _value(families, "vllm:generation_tokens", "vllm:generation_tokens_total") == new_tokens
    assert _value(families, "vllm:request_prompt_tokens", "vllm:request_prompt_tokens_sum") == prompt_tokens
    success = "vllm:request_success_total"
    assert _value(families, "vllm:request_success", success, finished_reason="length") == calls
    assert _value(families, "vllm:request_success", success, finished_reason="stop") == 0
    # The repeated prompt found its two whole blocks cached; the three-token one none.
    assert _value(families, "vllm:prefix_cache_queries", "vllm:prefix_cache_queries_total") == prompt_tokens
    assert (
        _value(families, "vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total") == 8 == load.prefix_cache_hit_tokens
    )
    assert [_value(families, n) for n in ("vllm:num_requests_waiting", "vllm:num_requests_running")] == [0, 0]
    # What each call asked for and what it took, once a call (vLLM's test_metrics_counts' figures).
    for name, total in [
        ("vllm:request_params_n", calls),
        ("vllm:request_params_max_tokens", new_tokens),
        ("vllm:request_max_num_generation_tokens", new_tokens),
        ("vllm:request_num_preemptions", 0),
        ("vllm:request_prefill_kv_computed_tokens", prompt_tokens - 8),
    ]:
        assert [_value(families, name, f"{name}_{s}") for s in ("count", "sum")] == [calls, total], name
    # One step a token (the calls ran one after the other, each prefill sampling the first); each step's tokens.
    steps = [
        _value(families, "vllm:iteration_tokens_total", f"vllm:iteration_tokens_total_{s}") for s in ("count", "sum")
    ]
    assert steps == [new_tokens, load.prompt_tokens_computed + new_tokens] == [13, prompt_tokens - 8 + 13]
    bounds = [s.labels["le"] for s in families["vllm:iteration_tokens_total"].samples if s.name.endswith("_bucket")]
    assert bounds[:3] == ["1.0", "8.0", "16.0"] and bounds[-1] == "+Inf"
    rejections = "vllm:admission_rejections_total"
    assert _value(families, "vllm:admission_rejections", rejections, reason="max_num_queued_reqs") == 1
    assert _value(families, "vllm:admission_rejections", rejections, reason="max_num_queued_tokens") == 0
    cached = "vllm:prompt_tokens_cached_by_source"
    assert _value(families, "vllm:prompt_tokens_cached", "vllm:prompt_tokens_cached_total") == 8
    assert [_value(families, cached, f"{cached}_total", source=s) for s in ("device", "p2p", "host")] == [8, 0, 0]
    waiting = "vllm:num_requests_waiting_by_reason"
    assert [_value(families, waiting, reason=r) for r in ("capacity", "deferred")] == [0, 0]
    sleep = "vllm:engine_sleep_state"
    assert [_value(families, sleep, sleep_state=s) for s in ("awake", "weights_offloaded", "discard_all")] == [1, 0, 0]
    assert _value(families, "vllm:kv_cache_usage_perc") == 0
    (config,) = families["vllm:cache_config_info"].samples
    assert config.value == 1 and config.labels["block_size"] == "4"
    assert config.labels["num_gpu_blocks"] == str(load.kv_blocks_used + load.kv_blocks_free)
    assert "vllm:lora_requests_info" not in families  # LoRA off: none, as vLLM
    ttft = families["vllm:time_to_first_token_seconds"].samples
    bounds = [float(s.labels["le"]) for s in ttft if s.name.endswith("_bucket")][:-1]
    assert tuple(bounds) == vllm_metrics.BUCKETS["time_to_first_token"]
    # The metrics port shows the same series beside ours, which keep their names.
    assert set(families) <= set(port) and "scaleout_engine_time_to_first_token_seconds" in port
    assert _value(port, "vllm:prompt_tokens", "vllm:prompt_tokens_total") == prompt_tokens


async def test_metrics_off_is_refused(tiny_model):  # noqa: F811
    async with engine_stub(tiny_model) as (stub, _):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.GetMetrics(engine_pb2.GetMetricsRequest())
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(refused.value) == Reason.METRICS_OFF


async def test_api_servers_count_each_call_once():
    """Calls over many connections land on both API servers; any of them answers for the whole engine. Too few KV
    blocks for all of them at once (two sequences of LONG tokens overfill the 15): some are preempted, each call's
    count comes from the core."""
    flags = ["--api-servers", "2", "--block-size", "4", "--metrics-port", "0", "--num-kv-blocks", "16"]
    args = make_parser().parse_args(flags)
    service = EngineService(args, build=functools.partial(build_tiny, args))
    async with serving(service, metrics=True) as served:
        channels = [
            grpc.aio.insecure_channel(served.target, options=[("grpc.use_local_subchannel_pool", 1)]) for _ in range(16)
        ]
        stubs = [engine_pb2_grpc.EngineServiceStub(c) for c in channels]
        message = request(PROMPT, temperature=0, max_tokens=LONG, ignore_eos=True)
        await asyncio.gather(*[generate(s, message) for s in stubs])
        load = await stubs[0].GetLoad(engine_pb2.GetLoadRequest())
        total = load.prompt_tokens_computed + 16 * LONG
        for _ in range(100):  # the core's last steps reach the API servers a moment after the answers (a loaded box)
            answers = [_families((await s.GetMetrics(engine_pb2.GetMetricsRequest())).data.decode()) for s in stubs]
            heard = [_value(f, "vllm:iteration_tokens_total", "vllm:iteration_tokens_total_sum") for f in answers]
            if heard == [total] * len(stubs):
                break
            await asyncio.sleep(0.1)
        first = _families(await asyncio.to_thread(_scrape, served.metrics_url))
        for channel in channels:
            await channel.close()
    ours = _value(
        first, "scaleout_engine_time_to_first_token_seconds", "scaleout_engine_time_to_first_token_seconds_count"
    )
    assert 0 < ours < len(stubs)  # the first API server served some of the calls, the other one the rest
    for families in answers + [first]:
        assert _value(families, "vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_count") == 16
        assert _value(families, "vllm:request_params_n", "vllm:request_params_n_count") == 16
        steps = _value(families, "vllm:iteration_tokens_total", "vllm:iteration_tokens_total_sum")
        assert steps == load.prompt_tokens_computed + 16 * LONG  # the core's steps, as each API server heard
        preempted = _value(families, "vllm:request_num_preemptions", "vllm:request_num_preemptions_sum")
        assert preempted == load.preemptions > 0
        assert _value(families, "vllm:prompt_tokens", "vllm:prompt_tokens_total") == 16 * len(PROMPT)
