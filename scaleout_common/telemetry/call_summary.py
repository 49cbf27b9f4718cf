"""One observed call's gen_ai.* summary: what the services' readers found, summed up onto its span and metrics.

The telemetry interceptor (rpc) makes a CallSummary per call and hands it every request and response message;
the readers each service registered (genai) say what a message means. The summary knows no message type: it
counts tokens, keeps usage, finish reasons and the response id, and owns the timing. It is the one place
that measures time to first token (TTFT), from the call's start to its first token: on a streamed call, when
the first generated token crosses the service boundary (event gen_ai.first_token); on a unary call, whose
tokens all leave at the end, when the engine sampled it (its `report_engine_timing(first_token_at=...)`
stamp: perf_counter is one monotonic clock for every process of the host, the engine core's included).
Inter-token latency: one sample per token after the first, a message of k tokens spreading its gap over them
(unary: the mean gap). What only the engine knows, time in queue, in prefill and in decode, it reports from its
Generate handler with `report_engine_timing`. A Generate call's numbers also feed the engine's histograms
(TTFT, inter-token latency, end to end) and token counters.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping, Sequence
from time import perf_counter

from opentelemetry.util.types import AttributeValue

from scaleout_common.telemetry import genai
from scaleout_common.telemetry.metrics import FinishedCall, LlmMetrics

# vLLM's span attribute names for request latencies (seconds).
QUEUE_TIME = "gen_ai.latency.time_in_queue"
TTFT = "gen_ai.latency.time_to_first_token"
PREFILL_TIME = "gen_ai.latency.time_in_model_prefill"
DECODE_TIME = "gen_ai.latency.time_in_model_decode"
E2E = "gen_ai.latency.e2e"
FIRST_TOKEN_EVENT = "gen_ai.first_token"


class CallSummary:
    """Sums up an RPC's messages (one, or a stream each way); implements genai.GenAiCall for the readers."""

    def __init__(self, start: float, llm: LlmMetrics | None, span, streaming: bool):
        self.start, self.llm, self.span, self.streaming = start, llm, span, streaming
        self.has_output = False  # saw engine output: the LLM metrics apply
        self.first: float | None = None  # perf_counter() of the first streamed token
        self.last: float | None = None  # ... and of the latest
        self.ttft: float | None = None  # seconds
        self.decode: float | None = None  # seconds from the first to the last sampled token, as the engine saw it
        self.attributes: dict[str, AttributeValue] = {}
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.counted_tokens = 0
        self.id: str | None = None
        self.finish_reasons: dict[int, str] = {}
        self.timing: dict[str, float] = {}

    # -- the messages, handed over by the interceptor --------------------------------------------------

    def request(self, message) -> None:
        genai.read_request(message, self)

    def response(self, message) -> None:
        genai.read_response(message, self)

    async def consume(self, requests):
        """Pass a request stream through, reading each message (DerenderStream's engine output)."""
        async for message in requests:
            genai.read_request(message, self)
            yield message

    # -- genai.GenAiCall: what the readers report ------------------------------------------------------

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        self.attributes.update(attributes)

    def generated(self, new_tokens: Sequence[int]) -> None:
        now = perf_counter()
        self.has_output = True
        self.counted_tokens += sum(new_tokens)
        new = max(new_tokens, default=0)
        if not (new and self.streaming):
            return
        # One inter-token sample per token after the first: a message of k tokens after a gap spreads the gap
        # over its k tokens (the engine merged steps for a slow reader); tokens that rode with the first one
        # arrived with it (gap 0).
        if self.last is None:
            self.first = now
            ttft = self._first_token(now)
            gap, new = 0.0, new - 1
            if self.llm is not None:
                self.llm.first_token(ttft)
            if self.span is not None:
                self.span.add_event(FIRST_TOKEN_EVENT)
        else:
            gap = (now - self.last) / new
        if self.llm is not None and new:
            self.llm.token_gaps(gap, new)
        self.last = now

    def passed(self, tokens: int) -> None:
        self.counted_tokens += tokens

    def prompt_tokens(self, count: int) -> None:
        self.input_tokens = count

    def usage(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.input_tokens, self.output_tokens = prompt_tokens, completion_tokens

    def finished(self, index: int, reason: str) -> None:
        self.finish_reasons[index] = reason

    def response_id(self, response_id: str) -> None:
        if response_id and not self.id:
            self.id = response_id

    # -- the engine's own numbers, and the end ---------------------------------------------------------

    def _first_token(self, at: float) -> float:
        """The one definition of TTFT: from the call's start to `at`, when its first token was seen."""
        self.ttft = at - self.start
        return self.ttft

    def engine_timing(
        self, queue_s: float | None, prefill_s: float | None, decode_s: float | None, first_token_at: float | None
    ) -> None:
        if queue_s is not None:
            self.timing["time_in_queue"] = queue_s
            if self.llm is not None:
                self.llm.queued(queue_s)
        if prefill_s is not None:
            self.timing["time_in_model_prefill"] = prefill_s
        self.decode = decode_s
        if first_token_at is not None and self.first is None:  # no token streamed: the engine's stamp
            self._first_token(first_token_at)

    def _latency(self, e2e: float) -> tuple[float, float] | None:
        """(TTFT, time in decode) in seconds, once a first token was seen. Decode: the engine's own measure where
        it reported one (tokens a slow reader got in one message were still sampled apart), else the first to the
        last streamed token; unary: the rest of the call."""
        if self.ttft is None:
            return None
        if self.decode is not None:
            return self.ttft, self.decode
        if self.first is not None and self.last is not None:
            return self.ttft, self.last - self.first
        return self.ttft, max(0.0, e2e - self.ttft)

    def end(self, ok: bool) -> None:
        now = perf_counter()
        output_tokens = self.output_tokens if self.output_tokens is not None else self.counted_tokens
        reasons = [self.finish_reasons[i] for i in sorted(self.finish_reasons)]
        e2e = now - self.start
        latency = self._latency(e2e)
        if self.llm is not None and self.has_output:
            if self.first is None and latency is not None:  # unary: the engine's first token, the mean token gap
                ttft, decode = latency
                self.llm.first_token(ttft)
                gaps = output_tokens - 1
                if gaps > 0:
                    self.llm.token_gaps(decode / gaps, gaps)
            self.llm.finished(
                FinishedCall(
                    e2e,
                    self.input_tokens or 0,
                    output_tokens,
                    reasons,
                    ttft=latency[0] if latency else None,
                    queue=self.timing.get("time_in_queue"),
                    prefill=self.timing.get("time_in_model_prefill"),
                    decode=latency[1] if latency else None,
                )
            )
        if self.span is None:
            return
        attributes = self.attributes
        attributes.update((f"gen_ai.latency.{k}", v) for k, v in self.timing.items())
        if self.input_tokens is not None:
            attributes[genai.NAMES["input_tokens"]] = self.input_tokens
        if self.output_tokens is not None or self.counted_tokens:
            attributes[genai.NAMES["output_tokens"]] = output_tokens
        if reasons:
            attributes[genai.NAMES["finish_reasons"]] = reasons
        if self.id:
            attributes.setdefault(genai.NAMES["response_id"], self.id)
        if self.has_output:
            attributes[E2E] = e2e
        if latency is not None:
            attributes[TTFT], attributes[DECODE_TIME] = latency
        self.span.set_attributes(attributes)


_current: contextvars.ContextVar[CallSummary | None] = contextvars.ContextVar("scaleout_genai_call", default=None)


def bind(summary: CallSummary) -> None:
    """Make `summary` the current call's (in the call's own task; see rpc._Call)."""
    _current.set(summary)


def observe_request(message) -> None:
    """A handler whose wire message is opaque (google.api.HttpBody) hands over its typed request here."""
    summary = _current.get()
    if summary is not None:
        summary.request(message)


def observe_response(message) -> None:
    """... and each typed answer it sends, so its span and metrics read as a typed call's would."""
    summary = _current.get()
    if summary is not None:
        summary.response(message)


def report_engine_timing(
    queue_s: float | None = None,
    prefill_s: float | None = None,
    decode_s: float | None = None,
    first_token_at: float | None = None,
) -> None:
    """The engine's Generate/GenerateUnary handler: seconds this request waited for a slot, spent in prefill and in
    decode (first to last sampled token), and the perf_counter() stamp of its first sampled token (the call's TTFT when no stream showed one).

    Lands on the request's span (gen_ai.latency.*) and histograms; a no-op without telemetry.
    """
    summary = _current.get()
    if summary is not None:
        summary.engine_timing(queue_s, prefill_s, decode_s, first_token_at)
