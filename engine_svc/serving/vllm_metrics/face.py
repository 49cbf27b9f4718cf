"""The vllm: face at work: an LlmObserver that tallies each Generate call, a RequestObserver of the engine's
requests (their figures as they end, refusals by queue limits), and the Prometheus collector that writes the
series of series.py from those tallies and the engine's load figures."""

from __future__ import annotations

import time
from bisect import bisect_left
from itertools import accumulate

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from engine_svc.serving.loader import LoadedEngine
from engine_svc.serving.pooling import counted_load
from engine_svc.serving.requests import EndedRequest
from engine_svc.serving.tallies import Tallies
from engine_svc.serving.vllm_metrics.series import SERIES, Series
from engine_svc.serving.vllm_metrics.vocab import (
    ADMISSION_REASON,
    ADMISSION_REASONS,
    ADMISSION_REJECTIONS,
    CACHE_CONFIG_INFO,
    ENGINE_SLEEP_STATE,
    FINISHED_REASON,
    FINISHED_REASONS,
    ITERATION_TOKENS,
    LABELLED,
    LABELS,
    LORA_REQUESTS_INFO,
    REQUEST_SUCCESS,
    SLEEP_STATES,
    SPEC_DECODE_PER_POS,
    TALLIED_BY,
    buckets,
    cache_config,
    lora_info,
)
from scaleout_common.telemetry.metrics import FinishedCall


class VllmMetrics:
    """The face: an LlmObserver that tallies each Generate call, a RequestObserver of the engine's requests, and a
    Prometheus collector of the vllm: series.

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
        self._per_request: list[tuple] = []

    def bind(self, loaded: LoadedEngine, api_servers: int = 1, shared=None, row: int = 0) -> Tallies:
        """Tally into `row` of `api_servers` rows (`shared`: the first API server's, in the others)."""
        self._loaded = loaded
        width = 0
        for series in SERIES:
            if series.kind == "histogram" and not series.same:
                self._bounds[series.name] = buckets(series.buckets, loaded.limits.max_model_len)
            if series.tallied:
                self._offset[series.name] = width
                if series.kind == "histogram":
                    width += len(self._bounds[series.name]) + 2  # the buckets, +Inf, the sum
                else:
                    width += len(TALLIED_BY[series.name][1]) if series.name in TALLIED_BY else 1
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
        self._per_request = slots(lambda s: s.ended is not None)
        loaded.engine.observers.append(self)
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

    # -- RequestObserver: on the serving event loop --------------------------------------------------------

    def refused(self, reason: str) -> None:
        if self._tallies is not None and reason in ADMISSION_REASON:
            self._row[self._offset[ADMISSION_REJECTIONS] + ADMISSION_REASONS.index(ADMISSION_REASON[reason])] += 1

    def ended(self, request: EndedRequest) -> None:
        if self._tallies is not None:
            for series, offset, bounds in self._per_request:
                self._observe(offset, bounds, series.ended(request))

    # -- the collector ---------------------------------------------------------------------------------

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def collect(self):
        loaded = self._loaded
        if self._tallies is None or loaded is None:
            return
        labels = [loaded.model_name, self.engine_id]
        load = counted_load(loaded.engine, loaded.pooler)
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
                config = cache_config(load, loaded.kv_cache_dtype, loaded.limits.max_model_len)
                yield self._info(series, config | dict(zip(LABELS, labels, strict=True)), 1)
            elif series.name == LORA_REQUESTS_INFO:
                if load.max_loras:  # LoRA off: vLLM makes no lora_requests_info
                    yield self._info(series, lora_info(load) | dict(zip(LABELS, labels, strict=True)), time.time())
            elif series.name in LABELLED:
                label, values = LABELLED[series.name]
                family = self._family(series, [*LABELS, label])
                for value, read in values.items():
                    family.add_metric([*labels, value], read(load))
                yield family
            elif series.name in TALLIED_BY:
                label, values = TALLIED_BY[series.name]
                family = self._family(series, [*LABELS, label])
                offset = self._offset[series.name]
                for i, value in enumerate(values):
                    family.add_metric([*labels, value], sums[offset + i])
                yield family
            elif series.name == ENGINE_SLEEP_STATE:
                asleep, level = loaded.engine.sleep_state()
                family = self._family(series, [*LABELS, "sleep_state"])
                for state, value in zip(SLEEP_STATES, (not asleep, asleep and level == 1, asleep and level == 2)):
                    family.add_metric([*labels, state], int(value))
                yield family
            elif series.name == ITERATION_TOKENS:
                steps = loaded.engine.step_tokens
                yield self._histogram_family(series, labels, self._bounds[series.name], steps.counts, steps.total)
            elif series.kind == "histogram":
                offset, bounds = self._offset[series.name], self._bounds[series.name]
                counts = sums[offset : offset + len(bounds) + 1]
                yield self._histogram_family(series, labels, bounds, counts, sums[offset + len(bounds) + 1])
            else:
                family = self._family(series, LABELS)
                family.add_metric(labels, series.load(load) if series.load else sums[self._offset[series.name]])
                yield family

    @staticmethod
    def _family(series: Series, labels: list[str]) -> CounterMetricFamily | GaugeMetricFamily:
        return (GaugeMetricFamily if series.kind == "gauge" else CounterMetricFamily)(
            series.name, series.help, labels=labels
        )

    @staticmethod
    def _histogram_family(series: Series, labels: list[str], bounds, counts, total: float) -> HistogramMetricFamily:
        """`counts`: per bucket, then beyond the last bound (not cumulative)."""
        cumulative = list(accumulate(counts))
        buckets = [(floatToGoString(b), cumulative[i]) for i, b in enumerate(bounds)] + [("+Inf", cumulative[-1])]
        family = HistogramMetricFamily(series.name, series.help, labels=LABELS)
        family.add_metric(labels, buckets, total)
        return family

    @staticmethod
    def _info(series: Series, labels: dict[str, str], value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(series.name, series.help, labels=list(labels))
        family.add_metric(list(labels.values()), value)
        return family
