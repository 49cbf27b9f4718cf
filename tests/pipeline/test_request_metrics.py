"""vLLM's per-request `metrics` from the engine's timings (pipeline_svc/request_metrics.py), held against vLLM 0.33's
own builder of that object (build_per_request_timing_metrics over the stamps the timings are the intervals of)."""

from __future__ import annotations

import pytest

from pipeline_svc import request_metrics
from scaleout.v1 import engine_pb2

serving = pytest.importorskip("vllm.entrypoints.generate.base.serving", reason="vLLM 0.33's wheel")
stats = pytest.importorskip("vllm.v1.metrics.stats")


def _timed(queue: float, prefill: float, decode: float) -> engine_pb2.GenerateResponse:
    timings = engine_pb2.RequestTimings(queue_seconds=queue, prefill_seconds=prefill, decode_seconds=decode)
    return engine_pb2.GenerateResponse(timings=timings)


@pytest.mark.parametrize("tokens", [1, 2, 7])
def test_the_object_is_vllms_for_the_same_stamps(tokens):
    queued = 100.0
    scheduled, first, last = queued + 0.004, queued + 0.029, queued + 0.029 + 0.012 * (tokens - 1)
    ours = request_metrics.per_request_metrics(
        [engine_pb2.GenerateResponse(), _timed(9, 9, 9), _timed(scheduled - queued, first - scheduled, last - first)],
        tokens,
    )
    vllm_stats = stats.RequestStateStats(queued_ts=queued, scheduled_ts=scheduled, first_token_ts=first)
    vllm_stats.last_token_ts = last
    theirs = serving.build_per_request_timing_metrics(vllm_stats, tokens).model_dump()
    assert ours.keys() == theirs.keys()
    assert ours == pytest.approx(theirs)
    assert (ours["mean_itl_ms"] is None) == (tokens == 1)


def test_untimed_or_not_one_generation():
    assert set(request_metrics.per_request_metrics([engine_pb2.GenerateResponse()], 3).values()) == {None}
    one = [[_timed(0.001, 0.002, 0.003)]]
    assert request_metrics.metrics(one, 0, 2) is not None and request_metrics.metrics(one, 1, 2) is not None
    assert request_metrics.metrics(one, 2, 2) is None  # n > 1: the stamps are one sequence's
    assert request_metrics.metrics(one * 2, 0, 2) is None  # two prompts
    assert request_metrics.without_nulls(None) == {}
    assert request_metrics.without_nulls(request_metrics.metrics(one, 0, 1)) == {
        "metrics": {"time_to_first_token_ms": 2.0, "generation_time_ms": 3.0, "queue_time_ms": 1.0}
        | {"tokens_per_second": pytest.approx(200.0)}
    }


@pytest.mark.parametrize("steps", [[], [(4, 4), (4, 0), (3, 2), (2, 1)]])
@pytest.mark.parametrize("detailed", [False, True])
def test_speculation_counts_are_vllms_object_for_the_same_steps(steps, detailed):
    """The engine's SpeculationCounts (the choice's final message) as vLLM's RequestSpecDecodeMetrics prints the
    same verify steps, parsed by vLLM's SpeculativeDecodingMetrics; none reported: null; Responses: null."""
    protocol = pytest.importorskip("vllm.entrypoints.generate.base.protocol")
    theirs = stats.RequestSpecDecodeMetrics.new(4)
    for drafted, accepted in steps:
        theirs.observe(drafted, accepted, detailed=detailed)
    counts = engine_pb2.SpeculationCounts(
        acceptance_histogram=theirs.histogram,
        num_draft_tokens=theirs.num_draft_tokens,
        num_spec_tokens=4,
        per_step_accepted=theirs.per_step_accepted,
        per_step_drafted=theirs.per_step_drafted,
    )
    final = engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(speculation=counts)])
    ours = request_metrics.per_request_metrics([_timed(0.001, 0.002, 0.003), final], 3)["speculative_decoding"]
    assert ours == theirs.to_dict()
    assert protocol.SpeculativeDecodingMetrics.model_validate(ours).num_spec_steps == len(steps)
    assert request_metrics.per_request_metrics([final], 3, speculation=False)["speculative_decoding"] is None
    assert request_metrics.per_request_metrics([_timed(0.001, 0.002, 0.003)], 3)["speculative_decoding"] is None


def test_without_the_flag_only_speculation_counts_make_a_metrics_key():
    """vLLM's chat / completions without --enable-per-request-metrics: `metrics` for the engine's speculation
    counts alone (timings null), no key without them; with the flag, the key always (null for n > 1)."""
    timed = _timed(0.001, 0.002, 0.003)
    counts = engine_pb2.SpeculationCounts(acceptance_histogram=[1, 0, 1], num_draft_tokens=4, num_spec_tokens=2)
    counted = engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(speculation=counts)])
    assert request_metrics.answer_metrics([[timed]], 0, 2, timed=False) == {}
    alone = request_metrics.answer_metrics([[timed, counted]], 0, 2, timed=False)["metrics"]
    assert alone["speculative_decoding"]["num_accepted_draft_tokens"] == 2
    assert {k for k, v in alone.items() if v is not None} == {"speculative_decoding"}
    assert request_metrics.answer_metrics([[timed, counted]], 2, 2, timed=False) == {}
    assert request_metrics.answer_metrics([[timed]], 2, 2, timed=True) == {"metrics": None}
    assert request_metrics.without_nulls(request_metrics.metrics([[timed, counted]], 1, 2, timed=False)) == {
        "metrics": {"speculative_decoding": alone["speculative_decoding"]}
    }
