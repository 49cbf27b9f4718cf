"""EngineStreamService: `/inference/v1/generate/stream`, the engine's Generate stream for REST clients.

An HTTP/1.1 client of a transcoded stream never sees gRPC trailers, and when the engine replica dies
mid-stream Envoy can only end the body: a 200 that simply stops. So REST reaches the engine's stream through
this relay, which calls EngineService.Generate (through the gateway: balanced on the prefix hash, retried while
nothing started) and forwards its messages unchanged. When that call fails after the first message, the relay
ends the stream with one GenerateResponse carrying the error (`hops.broken_off`: the engine's typed status,
or UPSTREAM_LOST); a failure before it is raised, and the gateway answers it with its HTTP status. A client
that goes away cancels the engine call, which aborts the request and frees its KV cache.
"""

from __future__ import annotations

import grpc

from pipeline_svc.hops import Hops, broken_off
from scaleout.v1 import engine_pb2, engine_stream_pb2_grpc
from scaleout_common import prefix_hash
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail


class EngineStreamRelay(engine_stream_pb2_grpc.EngineStreamServiceServicer):
    def __init__(self, hops: Hops):
        self.hops = hops

    async def Generate(self, request, context):
        call = self.hops.engine.Generate(
            request, timeout=context.time_remaining(), metadata=routing_metadata(request, context)
        )
        request_id, started = request.request_id, False
        try:
            async for message in call:
                yield message
                request_id, started = message.request_id, True
                if message.finished or message.HasField("error"):
                    return
            failure = fail(Reason.UPSTREAM_LOST, "the engine stream ended without its terminal message")
        except grpc.aio.AioRpcError as error:
            if not started:
                raise ServiceError.from_rpc_error(error) from None
            failure = broken_off(error)
        finally:
            call.cancel()  # a no-op once it ended; else the engine aborts the request
        # HTTP/1.1 clients never see trailers: the outcome travels in-band.
        yield engine_pb2.GenerateResponse(request_id=request_id, error=failure.to_status())


def routing_metadata(request, context):
    """The prefix-hash header the caller sent (as it would to the engine itself), else the request's own."""
    sent = dict(context.invocation_metadata() or ()).get(prefix_hash.ROUTING_HEADER)
    return ((prefix_hash.ROUTING_HEADER, sent),) if sent else prefix_hash.routing_metadata(request)
