"""FleetService: each engine replica's load and prefix-cache reset, typed (fleet.proto), over fleet.py.

Both are admin-scoped: refused here at once for a keyed caller without an admin key (so the answer is one
NOT_PERMITTED, not one per replica), and each replica scopes the call again (the caller's identity goes with
it). The router faces (pipeline_svc/faces/) build their foreign shapes on `loads` and `reset`.
"""

from __future__ import annotations

import dataclasses

from pipeline_svc.fleet import Answer, Fleet
from scaleout.v1 import (
    control_pb2,
    control_pb2_grpc,
    engine_pb2,
    engine_pb2_grpc,
    fleet_pb2,
    fleet_pb2_grpc,
    kv_events_pb2,
)
from scaleout_common.errors import ServiceError
from scaleout_common.identity import caller, require_trusted


def _scope(context, what: str) -> tuple[tuple[str, str], ...]:
    """The caller's identity for the replicas, once it is known to be allowed."""
    who = caller(context)
    require_trusted(who, what)
    return who.metadata()


def _error(answer: Answer):
    return answer.error.to_status() if answer.error is not None else None


def _failure(engine: fleet_pb2.EngineLoad | fleet_pb2.EngineCacheReset) -> ServiceError:
    """A replica's failure as the whole call's, its message naming the replica."""
    error = ServiceError.from_status(engine.error)
    return dataclasses.replace(error, message=f"engine {engine.engine}: {error.message}")


class FleetOperations(fleet_pb2_grpc.FleetServiceServicer):
    def __init__(self, fleet: Fleet):
        self.fleet = fleet

    async def _each(self, context, what: str, stub_class, method: str, request, **options) -> list[Answer]:
        metadata = _scope(context, what)
        time_left = context.time_remaining()
        return await self.fleet.call(stub_class, method, request, time_left=time_left, metadata=metadata, **options)

    async def control_all(self, context, method: str, request, timeout_s: float) -> list:
        """EngineControlService.`method` on every replica (`request`: a message, or one per replica position); their
        answers in the replicas' order. A replica that failed is the call's failure."""
        stub = control_pb2_grpc.EngineControlServiceStub
        answers = await self._each(context, method, stub, method, request, timeout_s=timeout_s)
        for answer in answers:
            if answer.error is not None:
                raise dataclasses.replace(
                    answer.error, message=f"engine {answer.replica.address}: {answer.error.message}"
                )
        return [a.response for a in answers]

    async def replica_count(self) -> int:
        """The engine replicas the hosts resolve to now (no call reaches them)."""
        replicas, _ = await self.fleet.replicas()
        return len(replicas)

    async def loads(self, context) -> fleet_pb2.GetLoadsResponse:
        request = engine_pb2.GetLoadRequest()
        answers = await self._each(context, "GetLoads", engine_pb2_grpc.EngineServiceStub, "GetLoad", request)
        return fleet_pb2.GetLoadsResponse(
            engines=[fleet_pb2.EngineLoad(engine=a.replica.address, load=a.response, error=_error(a)) for a in answers]
        )

    async def reset(self, context) -> fleet_pb2.FleetResetPrefixCacheResponse:
        request = control_pb2.ResetPrefixCacheRequest()
        stub = control_pb2_grpc.EngineControlServiceStub
        answers = await self._each(context, "ResetPrefixCache", stub, "ResetPrefixCache", request)
        return fleet_pb2.FleetResetPrefixCacheResponse(
            engines=[
                fleet_pb2.EngineCacheReset(engine=a.replica.address, reset=a.response, error=_error(a)) for a in answers
            ]
        )

    async def answered_loads(self, context) -> list[fleet_pb2.EngineLoad]:
        """The replicas that answered; when none did, the first failure, raised (a router then sees the status)."""
        engines = (await self.loads(context)).engines
        answered = [e for e in engines if not e.HasField("error")]
        if engines and not answered:
            raise _failure(engines[0])
        return answered

    async def reset_all(self, context) -> int:
        """Every replica's cache reset; the blocks dropped in all. A replica that failed is the call's failure."""
        engines = (await self.reset(context)).engines
        for engine in engines:
            if engine.HasField("error"):
                raise _failure(engine)
        return sum(e.reset.blocks_dropped for e in engines)

    async def kv_event_sources(self, context) -> list[tuple[str, kv_events_pb2.KvEventSource]]:
        """(replica address, its ZMQ KV-event source) of each replica that publishes one, in the replicas' order;
        when none answered, the first failure, raised."""
        request, stub = kv_events_pb2.GetKvEventSourcesRequest(), control_pb2_grpc.EngineControlServiceStub
        answers = await self._each(context, "GetKvEventSources", stub, "GetKvEventSources", request)
        answered = [a for a in answers if a.error is None]
        if answers and not answered and answers[0].error is not None:
            raise answers[0].error
        return [(a.replica.address, a.response.source) for a in answered if a.response.HasField("source")]

    async def GetLoads(self, request, context):
        return await self.loads(context)

    async def ResetPrefixCache(self, request, context):
        return await self.reset(context)
