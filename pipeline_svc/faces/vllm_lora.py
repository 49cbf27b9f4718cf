"""vLLM's runtime LoRA routes (its serve/lora router): `POST /v1/load_lora_adapter` and `/v1/unload_lora_adapter`,
served only when VLLM_ALLOW_RUNTIME_LORA_UPDATING is true (vLLM's variable, read at start: else 404
ROUTE_NOT_ENABLED, as vLLM then registers no route); admin-scoped, as the other control routes.

| vLLM body (Load/UnloadLoRAAdapterRequest) | ours                                                                  |
|-------------------------------------------|-----------------------------------------------------------------------|
| lora_name, lora_path                      | LoadLoraAdapterRequest: EngineControlService on every engine replica  |
|                                           | (each reads the folder on its own host), then RenderService (names)   |
| load_inplace, is_3d_lora_weight           | false only; true refused (UNSUPPORTED_FIELD): no in-place reload, no  |
|                                           | 3D (MoE) LoRA weights                                                 |
| unload: lora_name                         | UnloadLoraAdapterRequest: render first (no new request names it), then |
|                                           | every engine replica                                                  |
| unload: lora_int_id                       | refused when set (the engine numbers its adapters itself)             |
| answer                                    | vLLM's text: "Success: LoRA adapter '<name>' added/removed            |
|                                           | successfully."; errors in OpenAI's shape (LORA_REFUSED 400,           |
|                                           | LORA_NOT_FOUND 404, with vLLM's messages where it has them)           |

A load the render refuses (a served model's name, a name taken) is unloaded from the engines again. Render is
reached through the gateway, so with several render replicas only the one reached learns a name: list adapters
at start (`--lora-modules` on render and the engines) in that layout.
"""

from __future__ import annotations

import os

import grpc
from google.api import httpbody_pb2

from pipeline_svc.faces.rl_json import body as _body
from pipeline_svc.faces.rl_json import only as _only
from pipeline_svc.faces.rl_json import typed as _typed
from pipeline_svc.fleet_service import FleetOperations
from pipeline_svc.hops import Hops
from scaleout.v1 import common_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.identity import caller, require_trusted
from scaleout_common.reasons import Reason, fail

TIMEOUT_S = 120.0  # each engine reads the adapter's safetensors


def runtime_updating() -> bool:
    """vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING, as its envs module reads it."""
    return os.environ.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "0").strip().lower() in ("1", "true")


def _text(message: str) -> httpbody_pb2.HttpBody:
    return httpbody_pb2.HttpBody(content_type="text/plain; charset=utf-8", data=message.encode())


class VllmLora:
    """The LoRA routes of VllmServerService (mixed into the face's servicer, pipeline_svc/faces/vllm_server.py)."""

    fleet: FleetOperations
    hops: Hops
    lora_routes = runtime_updating()

    async def LoadLoraAdapter(self, request, context):
        body = self._checked(request, context, {"lora_name", "lora_path", "load_inplace", "is_3d_lora_weight"})
        for flag in ("load_inplace", "is_3d_lora_weight"):
            if _typed(body.get(flag, False), bool, flag):
                raise fail(Reason.UNSUPPORTED_FIELD, f"{flag}: not served (adapters load once, 2D weights)", flag)
        load = common_pb2.LoadLoraAdapterRequest(
            lora_name=_typed(body.get("lora_name") or "", str, "lora_name"),
            lora_path=_typed(body.get("lora_path") or "", str, "lora_path"),
        )
        await self.fleet.control_all(context, "LoadLoraAdapter", load, TIMEOUT_S)
        try:
            await self._render(context, "LoadLoraAdapter", load)
        except ServiceError:
            unload = common_pb2.UnloadLoraAdapterRequest(lora_name=load.lora_name)
            await self.fleet.control_all(context, "UnloadLoraAdapter", unload, TIMEOUT_S)
            raise
        return _text(f"Success: LoRA adapter '{load.lora_name}' added successfully.")

    async def UnloadLoraAdapter(self, request, context):
        body = self._checked(request, context, {"lora_name", "lora_int_id"})
        if body.get("lora_int_id") is not None:
            raise fail(Reason.UNSUPPORTED_FIELD, "lora_int_id: the engine numbers its adapters", "lora_int_id")
        unload = common_pb2.UnloadLoraAdapterRequest(lora_name=_typed(body.get("lora_name") or "", str, "lora_name"))
        await self._render(context, "UnloadLoraAdapter", unload)
        await self.fleet.control_all(context, "UnloadLoraAdapter", unload, TIMEOUT_S)
        return _text(f"Success: LoRA adapter '{unload.lora_name}' removed successfully.")

    def _checked(self, request, context, keys: set[str]) -> dict:
        if not self.lora_routes:
            raise fail(Reason.ROUTE_NOT_ENABLED, "runtime LoRA loading is off (set VLLM_ALLOW_RUNTIME_LORA_UPDATING)")
        require_trusted(caller(context), "the LoRA routes")
        body = _body(request)
        _only(body, keys)
        return body

    async def _render(self, context, method: str, request) -> None:
        try:
            await getattr(self.hops.render, method)(
                request, timeout=context.time_remaining(), metadata=caller(context).metadata()
            )
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None
