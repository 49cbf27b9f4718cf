"""Per-request timings and the figures `vllm bench serve` reports from them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class RequestResult:
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    start: float = 0.0
    first_token: float | None = None
    end: float = 0.0
    chunk_times: list[float] = field(default_factory=list)  # arrival of each message that carried tokens
    error: str = ""

    @property
    def ttft(self) -> float:
        return (self.first_token or self.end) - self.start

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first."""
        if self.output_tokens < 2 or self.first_token is None:
            return None
        return (self.end - self.first_token) / (self.output_tokens - 1)

    @property
    def itls(self) -> list[float]:
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:])]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "mean": sum(values) / len(values) if values else float("nan"),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
    }


def summarize(results: list[RequestResult], duration: float, slo_ttft_s: float, slo_tpot_s: float) -> dict:
    done = [r for r in results if not r.error]
    prompt = sum(r.prompt_tokens for r in done)
    output = sum(r.output_tokens for r in done)
    good = [
        r
        for r in done
        if r.ttft <= slo_ttft_s and (r.tpot is None or r.tpot <= slo_tpot_s)  # vLLM: a 1-token answer has no TPOT
    ]
    return {
        "requests": len(results),
        "failed": len(results) - len(done),
        "errors": Counter(r.error[:200] for r in results if r.error).most_common(3),  # why, when any failed
        "duration_s": duration,
        "request_per_s": len(done) / duration,
        "output_tok_per_s": output / duration,
        "total_tok_per_s": (prompt + output) / duration,
        "prompt_tokens": prompt,
        "output_tokens": output,
        "cached_tokens": sum(r.cached_tokens for r in done),
        "ttft_s": _stats([r.ttft for r in done]),
        "tpot_s": _stats([t for r in done if (t := r.tpot) is not None]),
        "itl_s": _stats([gap for r in done for gap in r.itls]),
        "goodput_req_per_s": len(good) / duration,
        "slo": {"ttft_s": slo_ttft_s, "tpot_s": slo_tpot_s},
    }
