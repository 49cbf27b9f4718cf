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
| speculative_decoding   | with its engine's --per-request-spec-decode-metrics only  | the engine's, same flag (below)      |

As vLLM, only where the figures belong to one generation: `n` 1 and (completions) one prompt, else `null`; every
field null when the engine reported no timings (no token was sampled). The completion tokens are the answer's
usage. The last engine message forwarded has the timings: a stream derender ended at a stop string reports the
tokens sampled until then (the engine's call is cancelled there, as vLLM's engine stops at the string).

`speculative_decoding`: the choice's engine.proto SpeculationCounts (its final message, with the engine's
--per-request-spec-decode-metrics) as vLLM's RequestSpecDecodeMetrics.to_dict prints them: the acceptance
histogram, steps, drafts accepted and proposed, mean acceptance length (1 + accepted / steps, the bonus token
counted; 1 without steps), draft acceptance rate (accepted / proposed; 0 without drafts), and with `detailed` the
per-step arrays. vLLM's Responses never fill it (`speculation=False`). Without --enable-per-request-metrics, as
vLLM's chat and completions: `metrics` only where the engine counted speculation, its timings null (`timed`).
"""

from __future__ import annotations

from scaleout.v1 import engine_pb2

TIMINGS = (
    "time_to_first_token_ms",
    "generation_time_ms",
    "queue_time_ms",
    "mean_itl_ms",
    "tokens_per_second",
)  # vLLM's PerRequestMetrics, in its order


def speculative_decoding(counts: engine_pb2.SpeculationCounts) -> dict:
    """vLLM's SpeculativeDecodingMetrics of one sequence's verify steps."""
    steps = sum(counts.acceptance_histogram)
    accepted = sum(j * n for j, n in enumerate(counts.acceptance_histogram))
    out = {
        "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / counts.num_draft_tokens if counts.num_draft_tokens else 0.0,
        "acceptance_histogram": list(counts.acceptance_histogram),
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": counts.num_draft_tokens,
        "num_spec_tokens": counts.num_spec_tokens,
    }
    if counts.per_step_accepted:
        out |= {"per_step_accepted": list(counts.per_step_accepted), "per_step_drafted": list(counts.per_step_drafted)}
    return out


def per_request_metrics(
    outputs: list[engine_pb2.GenerateResponse], completion_tokens: int, speculation: bool = True
) -> dict:
    """The `metrics` object of one generation's engine messages (as forwarded, the last one latest); without
    `speculation`, speculative_decoding null."""
    timed = [o.timings for o in outputs if o.HasField("timings")]
    out: dict = dict.fromkeys(TIMINGS)
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
    counted = [c.speculation for o in outputs for c in o.choices if c.HasField("speculation")]
    return out | {"speculative_decoding": speculative_decoding(counted[-1]) if speculation and counted else None}


def metrics(
    generations: list[list[engine_pb2.GenerateResponse]], n: int, completion_tokens: int, timed: bool = True
) -> dict | None:
    """The `metrics` of an answer of these generations (one per prompt; `n` choices each, 0 for one): None where
    they are not one. Not `timed` (no --enable-per-request-metrics): only the engine's speculation counts, the
    timings null (vLLM adds `metrics` for them alone), None without them."""
    if len(generations) != 1 or n > 1:
        return None
    out = per_request_metrics(generations[0], completion_tokens)
    return out if timed else untimed(out["speculative_decoding"])


def untimed(speculative: dict | None) -> dict | None:
    """vLLM's `metrics` for the engine's speculation counts alone (the timings null); None without them."""
    return None if speculative is None else dict.fromkeys(TIMINGS) | {"speculative_decoding": speculative}


def answer_metrics(
    generations: list[list[engine_pb2.GenerateResponse]], n: int, completion_tokens: int, timed: bool
) -> dict:
    """A unary answer's `metrics` key: with --enable-per-request-metrics always (null where not one generation);
    without, only where the engine counted speculation."""
    value = metrics(generations, n, completion_tokens, timed)
    return {"metrics": value} if timed or value is not None else {}


SPECULATIVE_OPTIONAL = ("per_step_accepted", "per_step_drafted")  # null unless the engine counted them


def as_vllms(value: dict | None) -> dict | None:
    """A client's `metrics` (the generate answer a derender route was given) as vLLM's PerRequestMetrics prints it:
    every key, null where not given."""
    if not isinstance(value, dict):
        return value
    out = dict.fromkeys(TIMINGS) | value
    speculative = out.get("speculative_decoding")
    if isinstance(speculative, dict):
        out["speculative_decoding"] = speculative | {k: speculative.get(k) for k in SPECULATIVE_OPTIONAL}
    else:
        out["speculative_decoding"] = speculative
    return out


def without_nulls(value: dict | None) -> dict:
    """A stream's usage chunk's `metrics` key, as vLLM dumps that chunk (nulls left out; no key when null)."""
    if value is None:
        return {}
    return {"metrics": {k: v for k, v in value.items() if v is not None}}
