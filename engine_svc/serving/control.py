"""EngineControlService: control operations on this engine replica, admin-scoped (scaleout_common.identity).

Over REST they reach every replica at once through the one-hop service (FleetService, pipeline_svc/fleet.py).
"""

from __future__ import annotations

from scaleout.v1 import control_pb2, control_pb2_grpc
from scaleout_common.identity import caller, require_trusted


class EngineControlServicer(control_pb2_grpc.EngineControlServiceServicer):
    def __init__(self, service):
        self.service = service  # EngineService: its engine is there once loaded (the server refuses calls before)

    async def ResetPrefixCache(self, request, context):
        require_trusted(caller(context), "ResetPrefixCache")
        dropped = await self.service.loaded.engine.reset_prefix_cache()
        return control_pb2.ResetPrefixCacheResponse(blocks_dropped=dropped)
