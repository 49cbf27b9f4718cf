"""Server interceptors every service shares: readiness gate and typed errors."""

from __future__ import annotations

import logging
from collections.abc import Callable

import grpc
from grpc.experimental import aio  # noqa: F401  (grpc.aio types)

from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

log = logging.getLogger(__name__)

# Health and reflection answer even while loading or draining, untraced and uncounted.
INFRASTRUCTURE_METHODS = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def _abort_status(error: BaseException) -> grpc.Status:
    if isinstance(error, ServiceError):
        return error.to_rpc_status()
    log.exception("unhandled error in servicer", exc_info=error)
    return fail(Reason.INTERNAL_ERROR, f"{type(error).__name__}: {error}").to_rpc_status()


def wrap_handler(handler: grpc.RpcMethodHandler, guard: Callable[[], None]) -> grpc.RpcMethodHandler:
    """Run `guard` before the behaviour, and turn exceptions into rich statuses."""
    kwargs = dict(request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)
    if handler.unary_unary or handler.stream_unary:
        inner = handler.unary_unary or handler.stream_unary

        async def unary(request, context):
            try:
                guard()
                return await inner(request, context)
            except (ServiceError, Exception) as error:
                if isinstance(error, grpc.aio.AbortError):
                    raise
                await context.abort_with_status(_abort_status(error))

        factory = grpc.unary_unary_rpc_method_handler if handler.unary_unary else grpc.stream_unary_rpc_method_handler
        return factory(unary, **kwargs)

    inner = handler.unary_stream or handler.stream_stream

    async def streaming(request, context):
        try:
            guard()
            async for message in inner(request, context):
                yield message
        except Exception as error:
            if isinstance(error, grpc.aio.AbortError):
                raise
            await context.abort_with_status(_abort_status(error))

    factory = grpc.unary_stream_rpc_method_handler if handler.unary_stream else grpc.stream_stream_rpc_method_handler
    return factory(streaming, **kwargs)


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
