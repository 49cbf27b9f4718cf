"""The health of the roles behind the gateway, for health checks that reach the one-hop service.

The gateway sends every `grpc.health.v1.Health` call to this service (gateway/envoy_config.py GATEWAY_GRPC), so a
check naming `scaleout.v1.RenderService`, `EngineService` or `DerenderService` is asked again over that role's hop
with `ROLE_HEADER` naming the role: the gateway routes it to the role's replicas (only a ready one, while one is),
and the replica answers for itself. A role no replica answers for (none up, none ready) is NOT_SERVING.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaleout.v1 import derender_pb2, engine_pb2, render_pb2
from scaleout_common.health import ROLE_HEADER

ROLES = {
    render_pb2.DESCRIPTOR.services_by_name["RenderService"].full_name: "render",
    engine_pb2.DESCRIPTOR.services_by_name["EngineService"].full_name: "engine",
    derender_pb2.DESCRIPTOR.services_by_name["DerenderService"].full_name: "derender",
}
CHECK_TIMEOUT_S = 5.0


async def role_health(channels: dict[str, grpc.aio.Channel], name: str):
    """The serving status of the role that serves `name` (None: no role of this deployment serves it)."""
    role = ROLES.get(name)
    if role is None:
        return None
    if role not in channels:  # asked before the hops are open
        return health_pb2.HealthCheckResponse.NOT_SERVING
    stub = health_pb2_grpc.HealthStub(channels[role])
    try:  # typeshed's HealthStub omits the methods its __init__ sets (Check, Watch)
        answer = await stub.Check(  # pyright: ignore[reportAttributeAccessIssue]
            health_pb2.HealthCheckRequest(service=name), timeout=CHECK_TIMEOUT_S, metadata=((ROLE_HEADER, role),)
        )
    except grpc.aio.AioRpcError:
        return health_pb2.HealthCheckResponse.NOT_SERVING
    return answer.status
