"""vLLM's per-request `metrics` object (its `--enable-per-request-metrics`, PerRequestMetrics) from the engine's
timings (engine.proto RequestTimings: the intervals between vLLM's queued, scheduled, first-token and last-token
stamps, measured by the engine on its own clock).

| field                  | vLLM 0.33 (build_per_request_timing_metrics)              | here                                 |
|------------------------|-----------------------------------------------------------|--------------------------------------|
| time_to_first_token_ms | scheduled -> first token (the prefill; not the queue)     | prefill_seconds                      |
| generation_time_ms     | first token -> last token                                 | decode_seconds                       |
| queue_time_ms          | queued -> scheduled                                       | queue_seconds                        |
| mean_itl_ms            | generation time / (completion tokens - 1); null for one   | the same                             |
| tokens_per_second      | completion tokens / (scheduled -> last token)             | the same, over prefill + decode      |
| speculative_decoding   | with its engine's --per-request-spec-decode-metrics only  | null (that engine flag is not served) |

As vLLM, only where the figures belong to one generation: `n` 1 and (completions) one prompt, else `null`; every
field null when the engine reported no timings (no token was sampled). The completion tokens are the answer's
usage. The last engine message forwarded has the timings: a stream derender ended at a stop string reports the
tokens sampled until then (the engine's call is cancelled there, as vLLM's engine stops at the string).
"""

from __future__ import annotations

from scaleout.v1 import engine_pb2


def per_request_metrics(outputs: list[engine_pb2.GenerateResponse], completion_tokens: int) -> dict:
    """The `metrics` object of one generation's engine messages (as forwarded, the last one latest)."""
    timed = [o.timings for o in outputs if o.HasField("timings")]
    out: dict = dict.fromkeys(
        ("time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms", "tokens_per_second")
    )
    if timed:
        t = timed[-1]
        out["time_to_first_token_ms"] = t.prefill_seconds * 1000
        out["generation_time_ms"] = t.decode_seconds * 1000
        out["queue_time_ms"] = t.queue_seconds * 1000
        if completion_tokens > 1:
            out["mean_itl_ms"] = t.decode_seconds / (completion_tokens - 1) * 1000
        inference = t.prefill_seconds + t.decode_seconds
        if inference > 0:
            out["tokens_per_second"] = completion_tokens / inference
    return out | {"speculative_decoding": None}


def metrics(generations: list[list[engine_pb2.GenerateResponse]], n: int, completion_tokens: int) -> dict | None:
    """The `metrics` of an answer of these generations (one per prompt; `n` choices each, 0 for one): None where
    they are not one."""
    if len(generations) != 1 or n > 1:
        return None
    return per_request_metrics(generations[0], completion_tokens)


def without_nulls(value: dict | None) -> dict:
    """A stream's usage chunk's `metrics` key, as vLLM dumps that chunk (nulls left out; no key when null)."""
    if value is None:
        return {}
    return {"metrics": {k: v for k, v in value.items() if v is not None}}
