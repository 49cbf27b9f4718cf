"""vLLM's server routes that vllm-router calls, as a face over the contract (vllm_server.proto).

`/health`, `/ping` and `/version` are the gateway's own answers (gateway/envoy.yaml.j2); here are the two that need
the engines: vllm-router's `/get_load` (its power_of_two policy reads `load`) and vLLM's `/reset_prefix_cache`.
Held against vllm-router 0.1.17 (its binary, run against a recording server: `GET /get_load`, `load` read as an
integer, -1 when missing) and vLLM 0.33's serve/dev/cache router (`{"success": bool}`, its two query flags).
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline_svc.fleet_service import FleetOperations
from pipeline_svc.shaped_route import json_body
from scaleout.v1 import fleet_pb2, vllm_server_pb2_grpc

# vllm-router's `/get_load` <- the engine replicas that answered GetLoad: the sequences each runs and queues.
GET_LOAD: dict[str, Callable[[list[fleet_pb2.EngineLoad]], object]] = {
    "load": lambda engines: sum(e.load.running + e.load.waiting for e in engines),
}

# vLLM's `/reset_prefix_cache` <- every replica reset (a replica that failed fails the call instead): a reset here
# never waits for running requests, so it always succeeds.
RESET: dict[str, Callable[[int], object]] = {
    "success": lambda blocks_dropped: True,
}


class VllmServer(vllm_server_pb2_grpc.VllmServerServiceServicer):
    def __init__(self, fleet: FleetOperations):
        self.fleet = fleet

    async def GetLoad(self, request, context):
        engines = await self.fleet.answered_loads(context)
        return json_body({name: value(engines) for name, value in GET_LOAD.items()})

    async def ResetPrefixCache(self, request, context):
        dropped = await self.fleet.reset_all(context)
        return json_body({name: value(dropped) for name, value in RESET.items()})
