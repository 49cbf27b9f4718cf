"""RPC telemetry interceptors: server spans + RPC metrics, and client spans that propagate W3C traceparent.

Attributes follow the stable RPC semantic conventions: span name and rpc.method "pkg.Service/Method",
rpc.system.name "grpc", rpc.response.status_code (the code's name), server.address / server.port and,
when the call failed, error.type (the code's name). Failure follows the gRPC conventions: any non-OK code
on a client span; on a server span only UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE,
DATA_LOSS (a caller's bad input is not the server's error). Metrics count every non-OK code as an error.
Health and reflection calls are not observed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from time import perf_counter
from typing import Any, cast

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from scaleout_common.interceptors import MethodWrappingInterceptor
from scaleout_common.telemetry.call_summary import CallSummary, bind
from scaleout_common.telemetry.metrics import ServiceMetrics

_Unary = Callable[[Any, Any], Awaitable[Any]]
_Streaming = Callable[[Any, Any], AsyncIterator[Any]]
SERVER_ERRORS = frozenset({"UNKNOWN", "DEADLINE_EXCEEDED", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS"})


def _split_target(target: str) -> tuple[str, int | None]:
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return target, None
    return host.removeprefix("dns:").removeprefix("ipv4:").strip("[]"), int(port)


def _rpc_attributes(method: str, host: str, port: int | None) -> dict[str, str | int]:
    attributes: dict[str, str | int] = {"rpc.system.name": "grpc", "rpc.method": method, "server.address": host}
    if port is not None:
        attributes["server.port"] = port
    return attributes


def _end_span(span, code: str, is_error: bool, description: str | None = None) -> None:
    span.set_attribute("rpc.response.status_code", code)
    if is_error:
        span.set_attribute("error.type", code)
        span.set_status(Status(StatusCode.ERROR, description or code))
    span.end()


def _code_name(context, error: BaseException | None) -> str:
    """The status of a call whose handler returned (error None) or raised `error`."""
    if isinstance(error, (asyncio.CancelledError, GeneratorExit)):
        return "CANCELLED"
    code = context.code()
    if code is None:
        return "OK" if error is None else "UNKNOWN"
    return code.name if isinstance(code, grpc.StatusCode) else grpc.StatusCode(code).name


class _Call:
    """One observed server call: its span (or None), its gen_ai summary (or None) and when it began.

    The span and the summary are made current in the call's own task (grpc.aio runs each call in a task of
    its own, so nothing is detached: the task's context dies with it). The call is finished when its handler
    returns or raises, before grpc sends the status, or else (cancelled while grpc was writing a message)
    from the servicer context's done callback.
    """

    __slots__ = ("finished", "span", "start", "summary")

    def __init__(self, interceptor: ServerTelemetryInterceptor, method: str, context, streaming: bool):
        self.start = perf_counter()
        self.finished = False
        self.span = self.summary = None
        if interceptor.tracer is not None:
            parent = propagate.extract(dict(context.invocation_metadata() or ()))
            self.span = interceptor.tracer.start_span(
                method, context=parent, kind=SpanKind.SERVER, attributes=interceptor.attributes(method)
            )
            otel_context.attach(trace.set_span_in_context(self.span, parent))
        if self.span is not None or interceptor.llm is not None:
            self.summary = CallSummary(self.start, interceptor.llm, self.span, streaming)
            bind(self.summary)

    def end(self, code: str) -> None:
        if self.summary is not None:
            self.summary.end(code == "OK")
        if self.span is not None:
            _end_span(self.span, code, code in SERVER_ERRORS)


class ServerTelemetryInterceptor(MethodWrappingInterceptor):
    """Outermost server interceptor: a SERVER span per call (current while the handler runs) and RPC metrics."""

    def __init__(self, tracer: trace.Tracer | None, metrics: ServiceMetrics | None):
        self.tracer = tracer
        self.metrics = metrics.rpc if metrics is not None else None
        self.llm = metrics.llm if metrics is not None else None
        super().__init__()
        self.set_address("", None)

    def set_address(self, host: str, port: int | None) -> None:
        """What spans report as server.address / server.port (known once the port is bound)."""
        self._host, self._port = host, port
        self._attributes: dict[str, dict] = {}

    def attributes(self, method: str) -> dict:
        cached = self._attributes.get(method)
        if cached is None:
            cached = self._attributes[method] = _rpc_attributes(method, self._host, self._port)
        return cached

    def _begin(self, method: str, context, streaming: bool) -> _Call:
        call = _Call(self, method, context, streaming)
        if self.metrics is not None:
            self.metrics.started(method)
        context.add_done_callback(lambda done: self._finish(call, method, "CANCELLED"))
        return call

    def _finish(self, call: _Call, method: str, code: str) -> None:
        if call.finished:
            return
        call.finished = True
        call.end(code)
        if self.metrics is not None:
            self.metrics.finished(method, code, perf_counter() - call.start)

    def wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        method = method[1:]
        kwargs = dict(
            request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )
        if handler.unary_unary or handler.stream_unary:
            inner = cast(_Unary, handler.unary_unary or handler.stream_unary)  # grpc.aio's: coroutines
            unary_request = handler.unary_unary is not None

            async def unary(request, context):
                call = self._begin(method, context, streaming=False)
                error = None
                summary = call.summary
                try:
                    if unary_request and summary is not None:
                        summary.request(request)
                    response = await inner(request, context)
                    if summary is not None:
                        summary.response(response)
                    return response
                except BaseException as e:
                    error = e
                    raise
                finally:
                    self._finish(call, method, _code_name(context, error))

            factory = grpc.unary_unary_rpc_method_handler if unary_request else grpc.stream_unary_rpc_method_handler
            return factory(unary, **kwargs)

        stream = cast(_Streaming, handler.unary_stream or handler.stream_stream)  # grpc.aio's: async generators
        unary_request = handler.unary_stream is not None

        async def streaming(request, context):
            call = self._begin(method, context, streaming=True)
            error = None
            summary = call.summary
            try:
                if summary is not None and unary_request:
                    summary.request(request)
                elif summary is not None:
                    request = summary.consume(request)
                async for message in stream(request, context):
                    if summary is not None:
                        summary.response(message)
                    yield message
            except BaseException as e:
                error = e
                raise
            finally:
                self._finish(call, method, _code_name(context, error))

        factory = grpc.unary_stream_rpc_method_handler if unary_request else grpc.stream_stream_rpc_method_handler
        return factory(streaming, **kwargs)


# -- client side ----------------------------------------------------------------------------------------


class _ClientTracing:
    """A CLIENT span per call; traceparent goes out in the call's metadata; the span ends with the call."""

    def __init__(self, tracer: trace.Tracer, target: str):
        self._tracer = tracer
        self._host, self._port = _split_target(target)
        self._pending: set[asyncio.Task] = set()

    async def _intercept(self, continuation, details, request):
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        method = method.lstrip("/")
        span = self._tracer.start_span(
            method, kind=SpanKind.CLIENT, attributes=_rpc_attributes(method, self._host, self._port)
        )
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        propagate.inject(metadata, context=trace.set_span_in_context(span))
        try:
            call = await continuation(details._replace(metadata=metadata), request)
        except BaseException as error:
            code = error.code().name if isinstance(error, grpc.RpcError) else type(error).__qualname__
            _end_span(span, code, True, str(error))
            raise
        call.add_done_callback(lambda done: self._schedule_end(span, done))
        return call

    def _schedule_end(self, span, call) -> None:
        # A done call's status is known, but only an awaitable gives it: end the span on the next loop turn.
        task = asyncio.get_running_loop().create_task(self._end(span, call))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    @staticmethod
    async def _end(span, call) -> None:
        try:
            code = (await call.code()).name
            details = await call.details()
        except asyncio.CancelledError:
            code, details = "CANCELLED", None
        _end_span(span, code, code != "OK", details)


class _UnaryUnary(_ClientTracing, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return await self._intercept(continuation, client_call_details, request)


class _UnaryStream(_ClientTracing, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation, client_call_details, request):
        return await self._intercept(continuation, client_call_details, request)


class _StreamUnary(_ClientTracing, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return await self._intercept(continuation, client_call_details, request_iterator)


class _StreamStream(_ClientTracing, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return await self._intercept(continuation, client_call_details, request_iterator)


def client_interceptors(target: str, tracer: trace.Tracer | None) -> list:
    """Tracing interceptors for a channel to `target`; none when tracing is off (no cost)."""
    if tracer is None:
        return []
    return [kind(tracer, target) for kind in (_UnaryUnary, _UnaryStream, _StreamUnary, _StreamStream)]
