"""Server interceptors every service shares: readiness gate and typed errors."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import grpc
from grpc.experimental import aio  # noqa: F401  (grpc.aio types)

from scaleout_common.errors import ServiceError
from scaleout_common.identity import admit
from scaleout_common.reasons import Reason, fail

log = logging.getLogger(__name__)

# Health and reflection answer even while loading or draining, untraced and uncounted.
INFRASTRUCTURE_METHODS = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def _abort_status(error: BaseException) -> grpc.Status:
    if isinstance(error, ServiceError):
        return error.to_rpc_status()
    # A bug: the log has the traceback under an id; the caller gets the id, never Python's text.
    incident = uuid.uuid4().hex[:12]
    log.error("unhandled error in servicer (incident %s)", incident, exc_info=error)
    return fail(Reason.INTERNAL_ERROR, f"internal error (incident {incident})").to_rpc_status()


class _Undecodable:
    """Requests whose bytes did not parse, each held until the behaviour's wrapper refuses it.

    gRPC would answer a deserializer's exception with UNKNOWN and Python's text; instead the deserializer
    hands on an empty message of the right type (so outer interceptors can read it) that is recorded here,
    and the wrapper around the behaviour refuses it with INVALID_ARGUMENT INVALID_MESSAGE.
    """

    def __init__(self) -> None:
        self._held: dict[int, object] = {}

    def deserializer(self, parse: Callable[[bytes], object] | None, empty: Callable[[], object] | None):
        if parse is None:
            return None

        def safe(raw: bytes):
            try:
                return parse(raw)
            except Exception:
                message = empty() if empty is not None else object()
                if len(self._held) > 10_000:  # calls that ended before their wrapper ran; never grows unbounded
                    self._held.clear()
                self._held[id(message)] = message
                return message

        return safe

    def check(self, message) -> None:
        if self._held.pop(id(message), None) is not None:
            raise fail(Reason.INVALID_MESSAGE, "the request is not a valid protobuf message for this method")

    async def checked(self, messages):
        async for message in messages:
            self.check(message)
            yield message


_UNDECODABLE = _Undecodable()

# grpc's stubs type RpcMethodHandler for the synchronous server (plain results, Iterator requests); under grpc.aio
# its behaviours are coroutine functions, and async generators, over a request or an async iterator of them.
_AioUnaryBehaviour = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
_AioStreamingBehaviour = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]


def _empty_factory(parse: Callable[[bytes], object] | None) -> Callable[[], object] | None:
    """`Message.FromString` -> the message class (to build an empty one)."""
    owner = getattr(parse, "__self__", None)
    return owner if isinstance(owner, type) else None


def wrap_handler(handler: grpc.RpcMethodHandler, guard: Callable[[], None]) -> grpc.RpcMethodHandler:
    """Run `guard` before the behaviour, turn exceptions into rich statuses, and refuse undecodable requests."""
    parse = handler.request_deserializer
    deserializer = _UNDECODABLE.deserializer(parse, _empty_factory(parse))
    serializer = handler.response_serializer
    if handler.unary_unary or handler.stream_unary:
        inner = cast(_AioUnaryBehaviour, handler.unary_unary or handler.stream_unary)
        check = _UNDECODABLE.check if handler.unary_unary else None

        async def unary(request, context):
            try:
                guard()
                admit(context)
                if check is not None:
                    check(request)
                else:
                    request = _UNDECODABLE.checked(request)
                return await inner(request, context)
            except (ServiceError, Exception) as error:
                if isinstance(error, grpc.aio.AbortError):
                    raise
                await context.abort_with_status(_abort_status(error))

        factory = grpc.unary_unary_rpc_method_handler if handler.unary_unary else grpc.stream_unary_rpc_method_handler
        return factory(unary, request_deserializer=deserializer, response_serializer=serializer)

    streaming_inner = cast(_AioStreamingBehaviour, handler.unary_stream or handler.stream_stream)
    unary_request = handler.unary_stream is not None

    async def streaming(request, context):
        try:
            guard()
            admit(context)
            if unary_request:
                _UNDECODABLE.check(request)
            else:
                request = _UNDECODABLE.checked(request)
            async for message in streaming_inner(request, context):
                yield message
        except Exception as error:
            if isinstance(error, grpc.aio.AbortError):
                raise
            await context.abort_with_status(_abort_status(error))

    factory = grpc.unary_stream_rpc_method_handler if handler.unary_stream else grpc.stream_stream_rpc_method_handler
    return factory(streaming, request_deserializer=deserializer, response_serializer=serializer)


class MethodWrappingInterceptor(grpc.aio.ServerInterceptor):
    """Wraps each service method's handler once and reuses it: the hot path is one dict lookup.

    The interceptors inside it must return one handler per method too (ours do).
    Health and reflection pass through untouched.
    """

    def __init__(self) -> None:
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    def wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        raise NotImplementedError

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is None:
            handler = await continuation(handler_call_details)
            if handler is None or method.startswith(INFRASTRUCTURE_METHODS):
                return handler
            wrapped = self._wrapped[method] = self.wrap(handler, method)
        return wrapped


class ErrorInterceptor(MethodWrappingInterceptor):
    """Refuses calls until the service is ready (UNAVAILABLE NOT_READY) and maps errors to typed statuses."""

    def __init__(self, is_ready: Callable[[], bool], is_draining: Callable[[], bool]):
        super().__init__()
        self._is_ready = is_ready
        self._is_draining = is_draining

    def _guard(self) -> None:
        if self._is_draining():
            raise fail(Reason.DRAINING, "server is shutting down; retry on another replica")
        if not self._is_ready():
            raise fail(Reason.NOT_READY, "server is still loading; retry shortly")

    def wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        return wrap_handler(handler, self._guard)
