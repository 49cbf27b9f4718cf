"""The vllm: face at work: an LlmObserver that tallies each Generate call, and the Prometheus collector that writes
the series of series.py from those tallies and the engine's load figures."""

from __future__ import annotations

import time
from bisect import bisect_left

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from engine_svc.serving.loader import LoadedEngine
from engine_svc.serving.tallies import Tallies
from engine_svc.serving.vllm_metrics.series import (
    CACHE_CONFIG_INFO,
    FINISHED_REASON,
    FINISHED_REASONS,
    LABELS,
    LORA_REQUESTS_INFO,
    PROMPT_SOURCES,
    PROMPT_TOKENS_BY_SOURCE,
    REQUEST_SUCCESS,
    SERIES,
    SPEC_DECODE_PER_POS,
    Series,
    buckets,
    cache_config,
)
from scaleout_common.telemetry.metrics import FinishedCall


class VllmMetrics:
    """The face: an LlmObserver that tallies each Generate call, and a Prometheus collector of the vllm: series.

    `bind` it once the engine is loaded; until then it reports nothing. `registry` holds it alone (GetMetrics)."""

    def __init__(self) -> None:
        self.engine_id = ""
        self.registry = CollectorRegistry()
        self.registry.register(self)
        self._loaded: LoadedEngine | None = None
        self._tallies: Tallies | None = None
        self._bounds: dict[str, tuple[float, ...]] = {}  # a histogram's bucket bounds, by series name
        self._offset: dict[str, int] = {}  # a tallied series' first slot in the row
        self._first_token: list[tuple] = []  # (series, offset, bounds) of the series fed by each event
        self._token_gaps: list[tuple] = []
        self._per_call: list[tuple] = []

    def bind(self, loaded: LoadedEngine, api_servers: int = 1, shared=None, row: int = 0) -> Tallies:
        """Tally into `row` of `api_servers` rows (`shared`: the first API server's, in the others)."""
        self._loaded = loaded
        width = 0
        for series in SERIES:
            if series.tallied or series.name == REQUEST_SUCCESS:
                self._offset[series.name] = width
                if series.kind == "histogram":
                    bounds = self._bounds[series.name] = buckets(series.buckets, loaded.limits.max_model_len)
                    width += len(bounds) + 2  # the buckets, +Inf, the sum
                else:
                    width += len(FINISHED_REASONS) if series.name == REQUEST_SUCCESS else 1
        for series in SERIES:
            if series.same:  # an old name reads the tallies of the series it stands for
                self._offset[series.name], self._bounds[series.name] = (
                    self._offset[series.same],
                    self._bounds[series.same],
                )
        self._tallies = Tallies(width, api_servers, shared, row)
        self._row = self._tallies.row

        def slots(selected):
            return [(s, self._offset[s.name], self._bounds.get(s.name)) for s in SERIES if selected(s)]

        self._first_token = slots(lambda s: s.on == "first_token")
        self._token_gaps = slots(lambda s: s.on == "token_gaps")
        self._per_call = slots(lambda s: s.call is not None)
        return self._tallies

    # -- LlmObserver: on the serving event loop, a few array stores each -----------------------------------

    def _observe(self, offset: int, bounds: tuple[float, ...], value: float, count: int = 1) -> None:
        row = self._row
        row[offset + bisect_left(bounds, value)] += count  # the first bound >= value: Prometheus' `le`
        row[offset + len(bounds) + 1] += value * count

    def first_token(self, ttft: float) -> None:
        if self._tallies is not None:
            for _, offset, bounds in self._first_token:
                self._observe(offset, bounds, ttft)

    def token_gaps(self, gap: float, count: int) -> None:
        if self._tallies is not None:
            for _, offset, bounds in self._token_gaps:
                self._observe(offset, bounds, gap, count)

    def finished(self, call: FinishedCall) -> None:
        if self._tallies is None:
            return
        for series, offset, bounds in self._per_call:
            value = series.call(call)
            if value is None:
                continue
            if bounds is None:
                self._row[offset] += value
            else:
                self._observe(offset, bounds, value)
        success = self._offset[REQUEST_SUCCESS]
        for reason in call.finish_reasons:
            self._row[success + FINISHED_REASONS.index(FINISHED_REASON.get(reason, "stop"))] += 1

    # -- the collector ---------------------------------------------------------------------------------

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def collect(self):
        loaded = self._loaded
        if self._tallies is None or loaded is None:
            return
        labels = [loaded.model_name, self.engine_id]
        load = loaded.engine.load()
        sums = self._tallies.sums()
        for series in SERIES:
            if series.name.startswith("vllm:spec_decode") and not load.spec_decode_num_accepted_tokens_per_pos:
                continue  # speculation off: vLLM makes no spec_decode series then
            if series.name == SPEC_DECODE_PER_POS:
                family = CounterMetricFamily(series.name, series.help, labels=[*LABELS, "position"])
                for position, value in enumerate(load.spec_decode_num_accepted_tokens_per_pos):
                    family.add_metric([*labels, str(position)], value)
                yield family
            elif series.name == CACHE_CONFIG_INFO:
                config = cache_config(load, loaded.kv_cache_dtype)
                yield self._info(series, config | dict(zip(LABELS, labels, strict=True)), 1)
            elif series.name == LORA_REQUESTS_INFO:
                lora = {"max_lora": "0", "waiting_lora_adapters": "", "running_lora_adapters": ""}
                yield self._info(series, lora | dict(zip(LABELS, labels, strict=True)), time.time())
            elif series.name == PROMPT_TOKENS_BY_SOURCE:
                family = CounterMetricFamily(series.name, series.help, labels=[*LABELS, "source"])
                for source, value in PROMPT_SOURCES.items():
                    family.add_metric([*labels, source], value(load))
                yield family
            elif series.name == REQUEST_SUCCESS:
                family = CounterMetricFamily(series.name, series.help, labels=[*LABELS, "finished_reason"])
                offset = self._offset[series.name]
                for i, reason in enumerate(FINISHED_REASONS):
                    family.add_metric([*labels, reason], sums[offset + i])
                yield family
            elif series.kind == "histogram":
                yield self._histogram_family(series, labels, sums)
            else:
                family = (GaugeMetricFamily if series.kind == "gauge" else CounterMetricFamily)(
                    series.name, series.help, labels=LABELS
                )
                family.add_metric(labels, series.load(load) if series.load else sums[self._offset[series.name]])
                yield family

    def _histogram_family(self, series: Series, labels: list[str], sums) -> HistogramMetricFamily:
        offset, bounds = self._offset[series.name], self._bounds[series.name]
        counts = sums[offset : offset + len(bounds) + 1].cumsum()
        cumulative = [(floatToGoString(b), counts[i]) for i, b in enumerate(bounds)] + [("+Inf", counts[-1])]
        family = HistogramMetricFamily(series.name, series.help, labels=LABELS)
        family.add_metric(labels, cumulative, sums[offset + len(bounds) + 1])
        return family

    @staticmethod
    def _info(series: Series, labels: dict[str, str], value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(series.name, series.help, labels=list(labels))
        family.add_metric(list(labels.values()), value)
        return family
