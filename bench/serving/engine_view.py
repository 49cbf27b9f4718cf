"""The engine's own view of a run: its Prometheus histograms (time in queue, TTFT from the Generate call's
start) scraped before and after the run and differenced, so the bench can say how much of the TTFT its
client saw was spent in the engine (and how much of that waiting to be scheduled) and how much on the way."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

TIMINGS = {"queue_s": "scaleout_engine_queue_time_seconds", "ttft_s": "scaleout_engine_time_to_first_token_seconds"}
COUNTERS = {"preemptions": "vllm:num_preemptions_total"}  # differenced as they are


def scrape(url: str) -> dict[str, tuple[float, float]]:
    """(sum, count) of each histogram in TIMINGS."""
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    found: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for key, name in TIMINGS.items():
                if sample.name in (f"{name}_sum", f"{name}_count"):
                    found.setdefault(key, [0.0, 0.0])[sample.name.endswith("_count")] = sample.value
            for key, name in COUNTERS.items():
                if sample.name == name:  # a counter: its value, and no count (difference() tells them apart)
                    found.setdefault(key, [0.0, -1.0])[0] += sample.value
    return {key: (value[0], value[1]) for key, value in found.items()}


def difference(before: dict, after: dict) -> dict[str, float]:
    """Mean seconds of each timing over the calls between the two scrapes; how much each counter grew."""
    means = {}
    for key, (total, count) in after.items():
        total0, count0 = before.get(key, (0.0, 0.0))
        if count < 0:  # a counter: how much it grew
            means[key] = total - total0
        elif count > count0:
            means[key] = (total - total0) / (count - count0)
    return means
