"""Decode runs and arrivals: a run of queued decode steps ends once a new request has waited
`--admission-window-ms`, so an arrival is prefilled within a step or two, not at the end of the run."""

from __future__ import annotations

import asyncio

from engine_svc.scheduling.admission import admit
from engine_svc.serving.engine import Engine
from tests.engine.conftest import build_tiny, engine_args, request


async def tokens_of_a_before_b_starts(window_ms: str) -> tuple[int, int]:
    """A long greedy stream A is decoding in 32-step runs when B arrives: A's token count when B was
    submitted, and when B's first token was sampled (read on the step thread, so exact)."""
    loaded = build_tiny(engine_args("--decode-steps", "32", "--admission-window-ms", window_ms))
    engine = loaded.engine
    assert isinstance(engine, Engine)
    seen: dict[str, int] = {}
    loop = asyncio.get_running_loop()

    def sink(outputs) -> None:  # on the step thread, right after each step
        if any(state.request_id == "b" for state, _ in outputs) and "b" not in seen:
            seen["b"] = len(a.output_ids)
        loop.call_soon_threadsafe(engine._deliver, outputs)

    engine.start(sink=sink)
    try:
        a = engine.submit(*admit(request([1, 5, 9], "a", temperature=0, max_tokens=400, ignore_eos=True),
                                 loaded.limits)[:2]).seqs[0]  # fmt: skip
        while len(a.output_ids) < 3:  # its first run is under way
            await asyncio.sleep(0.001)
        submitted = len(a.output_ids)
        engine.submit(*admit(request([1, 7], "b", temperature=0, max_tokens=1), loaded.limits)[:2])
        # B is marked done on the step thread before its step reaches the sink: wait for the sink
        while "b" not in seen:
            await asyncio.sleep(0.001)
        return submitted, seen["b"]
    finally:
        engine.stop()


async def test_an_arrival_ends_the_decode_run_within_its_window():
    submitted, started = await tokens_of_a_before_b_starts("0")
    # The run stops queueing at its next step; the step in flight and B's own (mixed) step add one each (and
    # a busy machine a few more between reading A's count and submitting B): far from the run's 32.
    assert started - submitted <= 8, (submitted, started)


async def test_a_long_window_keeps_the_run_whole():
    """A's first token comes from its prefill step, then runs of 32 decode steps: B, which arrived during a run,
    starts in the step after that run (A's token 34, 66, ...)."""
    submitted, started = await tokens_of_a_before_b_starts("60000")
    assert started > submitted and (started - 2) % 32 == 0, (submitted, started)
