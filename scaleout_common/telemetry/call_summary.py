"""GenAI span attributes and LLM metrics read off the contract's own messages, for every service at once.

The telemetry interceptor hands each RPC's request and response messages here: request knobs
(gen_ai.request.*) come from RenderChatRequest / GenerateRequest / DerenderChatRequest, results
(gen_ai.usage.*, gen_ai.response.*) from RenderChatResponse / GenerateResponse / ChatCompletion / chunks.
A Generate stream also feeds the engine's histograms (TTFT, inter-token latency, end to end) and token
counters. The one thing only the engine knows, time in queue and in prefill, it reports with
`report_engine_timing` from inside its Generate handler. Message text (gen_ai.input.messages /
gen_ai.output.messages, chat only) is recorded only when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
"""

from __future__ import annotations

import contextvars
import json
from time import perf_counter

from google.protobuf.json_format import MessageToDict

from scaleout.v1 import common_pb2, derender_pb2, engine_pb2, render_pb2
from scaleout_common import finish_reasons
from scaleout_common.metrics import LlmMetrics
from scaleout_common.tracing import capture_content

# vLLM's span attribute names for request latencies (seconds).
QUEUE_TIME = "gen_ai.latency.time_in_queue"
TTFT = "gen_ai.latency.time_to_first_token"
PREFILL_TIME = "gen_ai.latency.time_in_model_prefill"
DECODE_TIME = "gen_ai.latency.time_in_model_decode"
E2E = "gen_ai.latency.e2e"
FIRST_TOKEN_EVENT = "gen_ai.first_token"


def _sampling(params: common_pb2.SamplingParams) -> dict:
    out = {}
    for field, key in (
        ("max_tokens", "gen_ai.request.max_tokens"),
        ("temperature", "gen_ai.request.temperature"),
        ("top_p", "gen_ai.request.top_p"),
        ("seed", "gen_ai.request.seed"),
    ):
        if params.HasField(field):
            out[key] = getattr(params, field)
    return out


def _generate_request(msg: engine_pb2.GenerateRequest) -> dict:
    out = {
        "gen_ai.operation.name": "generate",
        "gen_ai.usage.input_tokens": len(msg.token_ids),
        "gen_ai.request.choice.count": msg.n if msg.HasField("n") else 1,
    }
    if msg.model:
        out["gen_ai.request.model"] = msg.model
    out.update(_sampling(msg.sampling_params))
    return out


def _render_chat_request(msg: render_pb2.RenderChatRequest) -> dict:
    out = {"gen_ai.operation.name": "chat"}
    if capture_content():
        out["gen_ai.input.messages"] = json.dumps([MessageToDict(m) for m in msg.messages], ensure_ascii=False)
    if msg.model:
        out["gen_ai.request.model"] = msg.model
    max_tokens = (
        msg.max_completion_tokens
        if msg.HasField("max_completion_tokens")
        else (msg.max_tokens if msg.HasField("max_tokens") else None)
    )
    for key, value in (
        ("gen_ai.request.max_tokens", max_tokens),
        ("gen_ai.request.temperature", msg.temperature if msg.HasField("temperature") else None),
        ("gen_ai.request.top_p", msg.top_p if msg.HasField("top_p") else None),
        ("gen_ai.request.seed", msg.seed if msg.HasField("seed") else None),
        ("gen_ai.request.choice.count", msg.n if msg.HasField("n") else None),
    ):
        if value is not None:
            out[key] = value
    return out


def _render_chat_response(msg: render_pb2.RenderChatResponse) -> dict:
    """Render resolves the server defaults: the span shows what the engine will actually be asked for."""
    out = _generate_request(msg.generate_request)
    out["gen_ai.operation.name"] = "chat"
    if msg.derender_context.id:
        out["gen_ai.response.id"] = msg.derender_context.id
    return out


def _derender_chat_request(msg: derender_pb2.DerenderChatRequest) -> dict:
    return {"gen_ai.operation.name": "chat", "gen_ai.request.model": msg.context.model} if msg.context.model else {}


REQUEST_ATTRIBUTES = {
    engine_pb2.GenerateRequest: _generate_request,
    render_pb2.RenderChatRequest: _render_chat_request,
    derender_pb2.DerenderChatRequest: _derender_chat_request,
}
_CHUNKS = (derender_pb2.ChatCompletion, derender_pb2.Completion, derender_pb2.ChatCompletionChunk)
_CHUNK_WRAPPERS = (derender_pb2.DerenderStreamResponse, derender_pb2.DerenderChunkResponse)


def request_attributes(msg) -> dict:
    extract = REQUEST_ATTRIBUTES.get(type(msg))
    return extract(msg) if extract else {}


class ResponseStream:
    """Sums up an RPC's response messages (one, or a stream): engine outputs, chat/completion chunks, renders."""

    def __init__(self, start: float, llm: LlmMetrics | None, span, streaming: bool):
        self.start, self.llm, self.span, self.streaming = start, llm, span, streaming
        self.generated = False  # saw engine output: the LLM metrics apply
        self.first = self.last = None  # perf_counter() of the first / latest streamed token
        self.ttft = None  # seconds; from the stream, or reported by the engine for a unary call
        self.attributes: dict = {}
        self.input_tokens = self.output_tokens = None
        self.counted_tokens = 0
        self.response_id = None
        self.finish_reasons: dict[int, str] = {}
        self.timing: dict[str, float] = {}

    def add(self, msg) -> None:
        kind = type(msg)
        if kind is engine_pb2.GenerateResponse:
            self._engine_output(msg)
        elif kind in _CHUNK_WRAPPERS:
            which = msg.WhichOneof("chunk")
            if which:
                self._chunk(getattr(msg, which))
        elif kind in _CHUNKS:
            self._chunk(msg)
        elif kind is render_pb2.RenderChatResponse:
            self.attributes.update(_render_chat_response(msg))

    async def consume(self, requests):
        """Pass a request stream through, counting the engine output it carries (DerenderStream's input)."""
        async for message in requests:
            if type(message) is derender_pb2.DerenderStreamRequest and message.HasField("engine_output"):
                output = message.engine_output
                self.counted_tokens += sum(len(c.token_ids) for c in output.choices)
                if output.HasField("prompt"):
                    self.input_tokens = output.prompt.num_tokens
                if output.HasField("usage"):
                    self.input_tokens, self.output_tokens = output.usage.prompt_tokens, output.usage.completion_tokens
            yield message

    def _engine_output(self, msg: engine_pb2.GenerateResponse) -> None:
        now = perf_counter()
        self.generated = True
        new = 0
        for choice in msg.choices:
            count = len(choice.token_ids)
            self.counted_tokens += count
            new = max(new, count)
            if choice.finish_reason:
                self.finish_reasons[choice.index] = finish_reasons.openai_name(choice.finish_reason)
        if msg.HasField("prompt"):
            self.input_tokens = msg.prompt.num_tokens
        if msg.HasField("usage"):
            self.input_tokens, self.output_tokens = msg.usage.prompt_tokens, msg.usage.completion_tokens
        if self.response_id is None and msg.request_id:
            self.response_id = msg.request_id
        if new and self.streaming:
            # One inter-token sample per token after the first: a message of k tokens after a gap spreads the
            # gap over its k tokens (the engine merged steps for a slow reader); tokens that rode with the
            # first one arrived with it (gap 0).
            if self.first is None:
                self.first = now
                self.ttft = now - self.start
                gap, new = 0.0, new - 1
                if self.llm is not None:
                    self.llm.time_to_first_token.observe(self.ttft)
                if self.span is not None:
                    self.span.add_event(FIRST_TOKEN_EVENT)
            else:
                gap = (now - self.last) / new
            if self.llm is not None:
                for _ in range(new):
                    self.llm.inter_token_latency.observe(gap)
            self.last = now

    def _chunk(self, msg) -> None:
        if msg is None:
            return
        self.response_id = self.response_id or msg.id
        if msg.model:
            self.attributes["gen_ai.response.model"] = msg.model
        for choice in msg.choices:
            if choice.finish_reason:
                self.finish_reasons[choice.index] = choice.finish_reason
        if type(msg) is derender_pb2.ChatCompletion and capture_content():
            self.attributes["gen_ai.output.messages"] = json.dumps(
                [MessageToDict(c.message) for c in msg.choices], ensure_ascii=False
            )
        if msg.HasField("usage"):
            self.input_tokens, self.output_tokens = msg.usage.prompt_tokens, msg.usage.completion_tokens

    def end(self, ok: bool) -> None:
        now = perf_counter()
        output_tokens = self.output_tokens if self.output_tokens is not None else self.counted_tokens
        reasons = [self.finish_reasons[i] for i in sorted(self.finish_reasons)]
        e2e = now - self.start
        decode = None
        if self.ttft is not None:
            decode = (self.last - self.first) if self.first is not None else max(0.0, e2e - self.ttft)
        if self.llm is not None and self.generated:
            if self.first is None and self.ttft is not None:  # unary: the engine's numbers, the mean token gap
                self.llm.time_to_first_token.observe(self.ttft)
                gaps = output_tokens - 1
                for _ in range(max(0, gaps)):
                    self.llm.inter_token_latency.observe(decode / gaps)
            self.llm.e2e_latency.observe(e2e)
            self.llm.prompt_tokens.inc(self.input_tokens or 0)
            self.llm.generation_tokens.inc(output_tokens)
            for reason in reasons:
                self.llm.finished.labels(reason).inc()
        if self.span is None:
            return
        attributes = self.attributes
        attributes.update((f"gen_ai.latency.{k}", v) for k, v in self.timing.items())
        if self.input_tokens is not None:
            attributes["gen_ai.usage.input_tokens"] = self.input_tokens
        if self.output_tokens is not None or self.counted_tokens:
            attributes["gen_ai.usage.output_tokens"] = output_tokens
        if reasons:
            attributes["gen_ai.response.finish_reasons"] = reasons
        if self.response_id:
            attributes.setdefault("gen_ai.response.id", self.response_id)
        if self.generated:
            attributes[E2E] = e2e
        if self.ttft is not None:
            attributes[TTFT] = self.ttft
            attributes[DECODE_TIME] = decode
        self.span.set_attributes(attributes)


_current: contextvars.ContextVar[ResponseStream | None] = contextvars.ContextVar("scaleout_genai_call", default=None)


def bind(stream: ResponseStream) -> None:
    """Make `stream` the current call's summary (in the call's own task; see rpc_telemetry._Call)."""
    _current.set(stream)


def report_engine_timing(
    queue_s: float | None = None, prefill_s: float | None = None, first_token_s: float | None = None
) -> None:
    """The engine's Generate/GenerateUnary handler: time this request waited for a slot, spent in prefill and,
    from its arrival, until its first token (used when no stream shows it: GenerateUnary).

    Lands on the request's span (gen_ai.latency.*) and histograms; a no-op without telemetry.
    """
    stream = _current.get()
    if stream is None:
        return
    if queue_s is not None:
        stream.timing["time_in_queue"] = queue_s
        if stream.llm is not None:
            stream.llm.queue_time.observe(queue_s)
    if prefill_s is not None:
        stream.timing["time_in_model_prefill"] = prefill_s
    if first_token_s is not None and stream.first is None:
        stream.ttft = first_token_s
