"""grpc.health.v1 for a server, and for the roles behind the gateway (grpcio-health-checking's servicer).

The stock servicer answers the names its server set (liveness "" and each service's readiness) and any other with
a bare NOT_FOUND. The gateway sends every health call to the one-hop service (gateway/envoy_config.py
GATEWAY_GRPC), so `Check` naming `scaleout.v1.EngineService` reached a server that holds no engine. Here a name
the server does not hold goes to the service's `health_elsewhere(name)` when it has one (the one-hop service asks
that role through the gateway, with `ROLE_HEADER` naming it so the gateway routes the call to the role's
replicas), and a name nobody holds is NOT_FOUND with a message that says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc
from grpc_health.v1 import health, health_pb2

from scaleout_common.errors import quote

# A health call with this header goes to the named role's replicas at the gateway instead of the one-hop service.
ROLE_HEADER = "x-scaleout-health-role"

Elsewhere = Callable[[str], Awaitable["health_pb2.HealthCheckResponse.ServingStatus | None"]]


class HealthServicer(health.aio.HealthServicer):  # pyright: ignore[reportAttributeAccessIssue]
    """The stock servicer, plus the names `elsewhere` answers for and a NOT_FOUND that names what is missing."""

    def __init__(self, elsewhere: Elsewhere | None = None):
        super().__init__()
        self._elsewhere = elsewhere

    def serving(self, name: str) -> bool:
        """Whether `name` (a service this server holds) is SERVING now: for the server's other faces (HTTP)."""
        return self._server_status.get(name) == health_pb2.HealthCheckResponse.SERVING

    async def Check(self, request, context):
        status = self._server_status.get(request.service)
        if status is None and self._elsewhere is not None:
            status = await self._elsewhere(request.service)
        if status is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no service named {quote(request.service)} reports its health here ('' is the server's own)",
            )
        return health_pb2.HealthCheckResponse(status=status)
